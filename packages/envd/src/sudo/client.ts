/**
 * `sudo` for AgentENV sandboxes (bin/sudo of the tools bundle). gVisor sets no_new_privs on
 * every process, so the setuid sudo cannot gain root; this client asks envd (root, pid 1) to run
 * the command instead, over envd's sudo socket, and relays stdin, stdout, stderr, signals,
 * the terminal size and the exit status. See src/sudo/protocol.ts and src/sudo/service.ts.
 */
import { connect, type Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { HELP, type ParsedRequest, parseSudoArgs, SUDO_COMPAT_VERSION, USAGE } from './args.js';
import { writeProof } from './proof.js';
import {
  type Challenge,
  DEFAULT_SUDO_SOCKET,
  encodeFrame,
  type ErrorMessage,
  type ExitMessage,
  type Frame,
  FrameDecoder,
  FrameType,
  jsonFrame,
  RELAYED_SIGNALS,
  STDIN_WINDOW,
  type SudoRequest,
} from './protocol.js';

/** stdin is a terminal this client put in raw mode: every way out must restore it. */
let rawTty = false;

function exit(code: number): never {
  if (rawTty) process.stdin.setRawMode(false);
  process.exit(code);
}

function fail(message: string, code = 1): never {
  process.stderr.write(`sudo: ${message}\n`);
  exit(code);
}

function currentDir(): string {
  try {
    return process.cwd();
  } catch {
    return process.env.PWD ?? '/';
  }
}

/** Answers envd's challenge (see proof.ts); a failure ends the client. */
function prove(challenge: Challenge): void {
  try {
    writeProof(challenge);
  } catch (err) {
    fail(`cannot prove who you are to envd: ${(err as Error).message}`);
  }
}

/** The request for envd: the command line's, with this process's environment, directory and terminal. */
function requestFor(parsed: ParsedRequest): SudoRequest {
  const interactive = parsed.action === 'run' && process.stdin.isTTY && process.stdout.isTTY;
  return {
    ...parsed,
    env: process.env as Record<string, string>,
    cwd: currentDir(),
    ...(interactive ? { tty: { cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 } } : {}),
  };
}

/** The exit status of sudo for the command's end: a signal's is 128 + its number, as in a shell. */
function exitStatus(end: ExitMessage): number {
  if (!end.signal) return end.code ?? 1;
  const signo = (osConstants.signals as Record<string, number>)[end.signal];
  return 128 + (signo ?? 0);
}

type Send = (type: FrameType, payload?: Uint8Array | string) => void;

/** stdin, signals and terminal size changes, to envd; at most STDIN_WINDOW stdin bytes unacknowledged. */
class InputRelay {
  private inFlight = 0;

  constructor(private readonly send: Send) {}

  start(interactive: boolean): void {
    const stdin = process.stdin;
    if (interactive) {
      stdin.setRawMode(true);
      rawTty = true;
      process.stdout.on('resize', () =>
        this.send(
          FrameType.resize,
          JSON.stringify({ cols: process.stdout.columns, rows: process.stdout.rows }),
        ),
      );
    }
    stdin.on('data', (d: Buffer) => {
      this.send(FrameType.stdin, d);
      this.inFlight += d.length;
      if (this.inFlight >= STDIN_WINDOW) stdin.pause();
    });
    const eof = () => this.send(FrameType.stdin);
    stdin.once('end', eof);
    stdin.once('error', eof);
    for (const sig of RELAYED_SIGNALS) process.on(sig, () => this.send(FrameType.signal, sig));
  }

  /** envd has passed `bytes` more of stdin to the command. */
  acknowledged(bytes: number): void {
    this.inFlight -= bytes;
    if (this.inFlight < STDIN_WINDOW && process.stdin.isPaused()) process.stdin.resume();
  }
}

/**
 * The command's output, to stdout and stderr: a full one stops reading the socket, and so, in turn,
 * the command.
 */
class OutputRelay {
  private readonly blocked = new Set<NodeJS.WriteStream>();
  private readonly broken = new Set<NodeJS.WriteStream>();

  constructor(
    private readonly socket: Socket,
    send: Send,
  ) {
    for (const stream of [process.stdout, process.stderr]) {
      stream.on('error', (err: NodeJS.ErrnoException) => {
        if (this.broken.has(stream)) return;
        this.broken.add(stream);
        this.unblock(stream);
        // Like a command writing straight to a closed pipe: it gets SIGPIPE.
        if (err.code === 'EPIPE') send(FrameType.signal, 'SIGPIPE');
      });
    }
  }

  write(stream: NodeJS.WriteStream, data: Buffer): void {
    if (this.broken.has(stream) || stream.destroyed) return;
    if (!stream.write(data) && !this.blocked.has(stream)) {
      if (this.blocked.size === 0) this.socket.pause();
      this.blocked.add(stream);
      stream.once('drain', () => this.unblock(stream));
    }
  }

  private unblock(stream: NodeJS.WriteStream): void {
    if (this.blocked.delete(stream) && this.blocked.size === 0) this.socket.resume();
  }
}

/** A session with envd's sudo service: the proof, the request, then the relays until the command ends. */
class EnvdSession {
  private readonly socket: Socket;
  private readonly decoder = new FrameDecoder();
  private readonly input: InputRelay;
  private readonly output: OutputRelay;
  private connected = false;
  /** envd has ended the session: the socket closing is expected from here on. */
  private done = false;

  constructor(
    private readonly socketPath: string,
    private readonly request: SudoRequest,
  ) {
    this.socket = connect(socketPath);
    const send: Send = (type, payload) => {
      if (!this.socket.destroyed) this.socket.write(encodeFrame(type, payload));
    };
    this.input = new InputRelay(send);
    this.output = new OutputRelay(this.socket, send);
    this.socket.on('connect', () => (this.connected = true));
    this.socket.on('data', (chunk: Buffer) => this.received(chunk));
    this.socket.on('error', (err: NodeJS.ErrnoException) => this.failed(err));
    this.socket.on('close', () => {
      if (!this.done) fail('lost the connection to envd');
    });
  }

  private received(chunk: Buffer): void {
    try {
      for (const f of this.decoder.push(chunk)) this.onFrame(f);
    } catch (err) {
      fail(`protocol error: ${(err as Error).message}`);
    }
  }

  private failed(err: NodeJS.ErrnoException): void {
    if (this.done) return;
    if (!this.connected) {
      fail(`unable to reach envd's sudo service at ${this.socketPath} (${err.code ?? err.message})`);
    }
    fail(`lost the connection to envd: ${err.message}`);
  }

  private onFrame(f: Frame): void {
    switch (f.type) {
      case FrameType.challenge:
        prove(JSON.parse(f.payload.toString('utf8')) as Challenge);
        this.socket.write(jsonFrame(FrameType.request, this.request));
        if (this.request.action === 'run') this.input.start(this.request.tty !== undefined);
        break;
      case FrameType.stdout:
        this.output.write(process.stdout, f.payload);
        break;
      case FrameType.stderr:
        this.output.write(process.stderr, f.payload);
        break;
      case FrameType.ack:
        this.input.acknowledged(f.payload.readUInt32BE(0));
        break;
      case FrameType.exit:
        this.done = true;
        exit(exitStatus(JSON.parse(f.payload.toString('utf8')) as ExitMessage));
        break;
      case FrameType.error: {
        this.done = true;
        const e = JSON.parse(f.payload.toString('utf8')) as ErrorMessage;
        fail(e.message, e.code || 1);
        break;
      }
      default:
        fail(`protocol error: unexpected frame type ${f.type} from envd`);
    }
  }
}

function run(parsed: ParsedRequest): void {
  new EnvdSession(process.env.AENV_SUDO_SOCKET || DEFAULT_SUDO_SOCKET, requestFor(parsed));
  // A paused socket does not keep node running: the command's end is what ends this process.
  setInterval(() => undefined, 1 << 30);
}

const invocation = parseSudoArgs(process.argv.slice(2));
switch (invocation.kind) {
  case 'help':
    process.stdout.write(`${HELP}\n`);
    exit(0);
    break;
  case 'version':
    process.stdout.write(
      `Sudo version ${SUDO_COMPAT_VERSION}\n` +
        'AgentENV sudo: commands run through envd, the sandbox daemon (gVisor forbids setuid)\n',
    );
    exit(0);
    break;
  case 'noop':
    exit(0);
    break;
  case 'usage':
    if (invocation.message) process.stderr.write(`sudo: ${invocation.message}\n`);
    process.stderr.write(`${USAGE}\n`);
    exit(1);
    break;
  case 'error':
    fail(invocation.message);
    break;
  case 'request':
    run(invocation.request);
}
