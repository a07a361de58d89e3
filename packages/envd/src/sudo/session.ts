import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, rmSync, statSync } from 'node:fs';
import { constants as osConstants, hostname } from 'node:os';
import path from 'node:path';
import type { Socket } from 'node:net';
import { spawn as spawnPty, type IPty } from 'node-pty';
import type { Logger } from 'pino';
import { DEFAULT_PATH, processEnv } from '../env.js';
import { signalGroup } from '../process/pipe-backend.js';
import type { EnvdState } from '../state.js';
import type { SystemUser } from '../users.js';
import { commandEnv, commandPlan, maySudo } from './policy.js';
import { verifyProof } from './proof.js';
import {
  ackPayload,
  type Challenge,
  encodeFrame,
  type ErrorMessage,
  type ExitMessage,
  FrameDecoder,
  FrameType,
  jsonFrame,
  parseRequest,
  RELAYED_SIGNALS,
  SudoRefusal,
  type SudoRequest,
} from './protocol.js';

/** After the command exits, output still arriving is relayed until this long a silence. */
const DRAIN_IDLE_MS = 250;
/** A client must send its request this soon after connecting. */
const REQUEST_TIMEOUT_MS = 30_000;
/** After the client goes away: SIGHUP to the command, then SIGKILL this much later. */
const HANGUP_GRACE_MS = 2_000;
/** Signals a client may relay to its command: the ones it relays, and SIGPIPE when its output is closed. */
const RELAYED = new Set<string>([...RELAYED_SIGNALS, 'SIGPIPE']);

export interface SessionContext {
  state: EnvdState;
  logger: Logger;
  /** Where clients put their proof files (see verifyProof). */
  authDir: string;
  /** Called once the session has ended, to forget it. */
  onClose(session: SudoSession): void;
}

/** `cmd` as an absolute path: with a slash, relative to `cwd`; otherwise searched in PATH. */
export function findExecutable(cmd: string, searchPath: string, cwd: string): string | undefined {
  const candidates = cmd.includes('/')
    ? [path.resolve(cwd, cmd)]
    : searchPath.split(':').map((dir) => path.resolve(cwd, dir || '.', cmd));
  return candidates.find((file) => {
    try {
      accessSync(file, constants.X_OK);
      return statSync(file).isFile();
    } catch {
      return false;
    }
  });
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function signalName(n: number): string {
  const found = Object.entries(osConstants.signals).find(([, v]) => v === n);
  return found?.[0] ?? `SIG${n}`;
}

/** The relay of one client connection: authenticate, authorize, run, stream, report the end. */
export class SudoSession {
  private readonly decoder = new FrameDecoder();
  private readonly nonce = randomBytes(16).toString('hex');
  private requestTimer: NodeJS.Timeout | undefined;
  private started = false;
  private child: ChildProcess | undefined;
  private pty: IPty | undefined;
  private pid: number | undefined;
  private exit: ExitMessage | undefined;
  private openStreams = 0;
  private paused = false;
  private drainTimer: NodeJS.Timeout | undefined;
  private finished = false;

  constructor(
    private readonly socket: Socket,
    private readonly ctx: SessionContext,
  ) {}

  start(): void {
    const challenge: Challenge = { nonce: this.nonce, dir: this.ctx.authDir };
    this.socket.write(jsonFrame(FrameType.challenge, challenge));
    this.requestTimer = setTimeout(() => this.socket.destroy(), REQUEST_TIMEOUT_MS);
    this.socket.on('data', (chunk: Buffer) => {
      try {
        for (const frame of this.decoder.push(chunk)) this.onFrame(frame.type, frame.payload);
      } catch (err) {
        this.fail(err);
      }
    });
    this.socket.on('drain', () => this.resume());
    this.socket.on('error', () => {
      // the client went away; 'close' follows
    });
    this.socket.on('close', () => this.onClientGone());
  }

  /** Ends the command (envd is shutting down). */
  kill(): void {
    if (this.pid !== undefined && !this.exit) signalGroup(this.pid, 'SIGKILL');
    this.socket.destroy();
  }

  private onFrame(type: number, payload: Buffer): void {
    if (!this.started) {
      if (type !== FrameType.request) throw new SudoRefusal('protocol error: expected a request');
      this.started = true;
      clearTimeout(this.requestTimer);
      this.handleRequest(parseRequest(payload));
      return;
    }
    if (type === FrameType.stdin) this.onInput(payload);
    else if (type === FrameType.signal) {
      const sig = payload.toString('utf8');
      if (RELAYED.has(sig) && this.pid !== undefined && !this.exit)
        signalGroup(this.pid, sig as NodeJS.Signals);
    } else if (type === FrameType.resize) {
      const { cols, rows } = JSON.parse(payload.toString('utf8')) as { cols: number; rows: number };
      const valid = [cols, rows].every((n) => Number.isInteger(n) && n >= 1 && n <= 10_000);
      if (valid && this.pty && !this.exit) this.pty.resize(cols, rows);
    } else throw new SudoRefusal(`protocol error: unexpected frame type ${type}`);
  }

  private handleRequest(req: SudoRequest): void {
    const { state, logger } = this.ctx;
    const users = state.users;
    let uid: number;
    try {
      uid = verifyProof(this.ctx.authDir, this.nonce);
    } finally {
      this.removeProof();
    }
    const caller = this.userById(uid);
    if (!maySudo(users, caller)) {
      logger.warn({ caller: caller.name, argv: req.argv }, 'sudo refused');
      throw new SudoRefusal(
        `${caller.name} is not in the sudoers file (this sandbox's sudo allows root, members of the ` +
          `sudo or wheel group and users granted ALL in /etc/sudoers or /etc/sudoers.d)`,
      );
    }
    if (req.action === 'validate') return this.finish({ code: 0 });
    if (req.action === 'list' && !req.argv.length) return this.listPrivileges(req, caller);

    const target = req.user ? this.userByName(req.user) : req.group ? caller : this.userByName('root');
    const gid = req.group ? this.groupId(req.group) : target.gid;
    const securePath = state.envVars.PATH ?? DEFAULT_PATH;
    const plan = commandPlan(req, caller, target);
    const cwd = this.workdir(req, target);
    const file = findExecutable(plan.file, securePath, cwd);
    if (req.action === 'list') {
      if (!file) throw new SudoRefusal(`${plan.file}: command not found`);
      this.send(FrameType.stdout, [file, ...plan.args].join(' ') + '\n');
      return this.finish({ code: 0 });
    }
    if (!file) throw new SudoRefusal(`${plan.file}: command not found`);

    const command = [file, ...plan.args].join(' ');
    const env = processEnv(
      target,
      state.envVars,
      commandEnv({ request: req, caller, target, securePath, command }),
    );
    // As envd's process manager: root keeps root's groups, anyone else gets its uid and group.
    const ids = target.uid !== 0 ? { uid: target.uid, gid } : req.group ? { gid } : {};
    logger.info({ caller: caller.name, target: target.name, command, cwd, tty: !!req.tty }, 'sudo');
    if (req.tty) this.startPty(file, plan.args, { cwd, env, ...ids }, req.tty);
    else this.startPipes(file, plan.file, plan.args, { cwd, env, ...ids });
  }

  private userById(uid: number): SystemUser {
    try {
      return this.ctx.state.users.byUid(uid);
    } catch {
      return { name: `#${uid}`, uid, gid: uid, home: '/', shell: '/bin/sh' };
    }
  }

  private userByName(spec: string): SystemUser {
    const users = this.ctx.state.users;
    try {
      return /^#\d+$/.test(spec) ? users.byUid(Number(spec.slice(1))) : users.lookup(spec);
    } catch {
      throw new SudoRefusal(`unknown user ${spec}`);
    }
  }

  private groupId(spec: string): number {
    try {
      return this.ctx.state.users.group(spec).gid;
    } catch {
      throw new SudoRefusal(`unknown group ${spec}`);
    }
  }

  /** -D, else the target's home for -i, else the caller's directory (or / when it is gone). */
  private workdir(req: SudoRequest, target: SystemUser): string {
    const callerCwd = path.isAbsolute(req.cwd) && isDirectory(req.cwd) ? req.cwd : '/';
    if (req.chdir !== undefined) {
      const dir = path.resolve(callerCwd, req.chdir);
      if (!isDirectory(dir)) throw new SudoRefusal(`unable to change directory to ${dir}: not a directory`);
      return dir;
    }
    if (req.login) return isDirectory(target.home) ? target.home : '/';
    return callerCwd;
  }

  /** `sudo -l [-U user]`: everything or nothing, whatever the rule that allowed it. */
  private listPrivileges(req: SudoRequest, caller: SystemUser): void {
    const who = req.listUser ? this.userByName(req.listUser) : caller;
    const host = hostname();
    this.send(
      FrameType.stdout,
      maySudo(this.ctx.state.users, who)
        ? `User ${who.name} may run the following commands on ${host}:\n    (ALL : ALL) NOPASSWD: ALL\n`
        : `User ${who.name} is not allowed to run sudo on ${host}.\n`,
    );
    this.finish({ code: 0 });
  }

  private send(type: number, data: Uint8Array | string): void {
    if (this.socket.destroyed || this.socket.writableEnded) return;
    if (!this.socket.write(encodeFrame(type, data)) && !this.paused) {
      this.paused = true;
      this.child?.stdout?.pause();
      this.child?.stderr?.pause();
      this.pty?.pause();
    }
  }

  private resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.child?.stdout?.resume();
    this.child?.stderr?.resume();
    this.pty?.resume();
    this.armDrain();
  }

  private startPipes(
    file: string,
    argv0: string,
    args: string[],
    opts: { cwd: string; env: Record<string, string>; uid?: number; gid?: number },
  ): void {
    const child = spawn(file, args, { ...opts, argv0, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    this.pid = child.pid;
    child.once('error', (err) => this.fail(new SudoRefusal(`unable to execute ${file}: ${err.message}`)));
    child.stdin!.on('error', () => {
      // EPIPE: the command does not read its stdin (any more)
    });
    for (const [stream, type] of [
      [child.stdout!, FrameType.stdout],
      [child.stderr!, FrameType.stderr],
    ] as const) {
      this.openStreams++;
      stream.on('data', (d: Buffer) => {
        this.send(type, d);
        this.armDrain();
      });
      stream.once('close', () => {
        this.openStreams--;
        this.armDrain();
      });
    }
    child.once('exit', (code, signal) => {
      this.exit = signal ? { signal } : { code: code ?? 1 };
      this.armDrain();
    });
  }

  private startPty(
    file: string,
    args: string[],
    opts: { cwd: string; env: Record<string, string>; uid?: number; gid?: number },
    size: { cols: number; rows: number },
  ): void {
    const pty = spawnPty(file, args, {
      name: opts.env.TERM ?? 'xterm-256color',
      cols: Math.min(10_000, Math.max(1, size.cols || 80)),
      rows: Math.min(10_000, Math.max(1, size.rows || 24)),
      ...opts,
      // Raw bytes: terminal output is not always valid UTF-8 at chunk boundaries.
      encoding: null,
    });
    this.pty = pty;
    this.pid = pty.pid;
    pty.onData((d) => this.send(FrameType.stdout, d as unknown as Buffer));
    // node-pty reports the exit once the terminal's output has been read.
    pty.onExit(({ exitCode, signal }) =>
      this.finish(signal ? { signal: signalName(signal) } : { code: exitCode }),
    );
  }

  private onInput(data: Buffer): void {
    const n = data.length;
    if (this.pty) {
      if (n && !this.exit) this.pty.write(data as unknown as string);
      if (n) this.send(FrameType.ack, ackPayload(n));
      return;
    }
    const stdin = this.child?.stdin;
    if (!stdin || stdin.destroyed || stdin.writableEnded) {
      if (n) this.send(FrameType.ack, ackPayload(n));
      return;
    }
    if (n === 0) stdin.end();
    else stdin.write(data, () => this.send(FrameType.ack, ackPayload(n)));
  }

  /** After the exit, ends once the output pipes close or fall silent (a daemon may hold them). */
  private armDrain(): void {
    clearTimeout(this.drainTimer);
    if (!this.exit || this.finished) return;
    if (this.openStreams === 0) return this.finish(this.exit);
    if (this.paused) return;
    this.drainTimer = setTimeout(() => this.finish(this.exit!), DRAIN_IDLE_MS);
  }

  private finish(end: ExitMessage): void {
    if (this.finished) return;
    this.finished = true;
    this.exit ??= end;
    clearTimeout(this.drainTimer);
    this.send(FrameType.exit, JSON.stringify(end));
    this.socket.end();
    this.child?.stdout?.destroy();
    this.child?.stderr?.destroy();
    this.child?.stdin?.destroy();
  }

  private fail(err: unknown): void {
    if (!(err instanceof SudoRefusal)) this.ctx.logger.warn({ err }, 'sudo session failed');
    if (this.finished) return;
    this.finished = true;
    const msg: ErrorMessage = { message: err instanceof Error ? err.message : String(err), code: 1 };
    this.send(FrameType.error, JSON.stringify(msg));
    this.socket.end();
    if (this.pid !== undefined && !this.exit) signalGroup(this.pid, 'SIGKILL');
  }

  private onClientGone(): void {
    clearTimeout(this.requestTimer);
    this.removeProof();
    // Output has nowhere to go any more: the pipes close, as a terminal's would on a hangup.
    for (const stream of [this.child?.stdin, this.child?.stdout, this.child?.stderr]) stream?.destroy();
    const pid = this.pid;
    if (pid !== undefined && !this.exit) {
      // Like a terminal hangup: the command may still clean up, then it is killed.
      signalGroup(pid, 'SIGHUP');
      const timer = setTimeout(() => {
        if (!this.exit) signalGroup(pid, 'SIGKILL');
      }, HANGUP_GRACE_MS);
      timer.unref();
    }
    this.ctx.onClose(this);
  }

  private removeProof(): void {
    rmSync(path.join(this.ctx.authDir, this.nonce), { force: true });
  }
}
