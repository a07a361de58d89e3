import { stat } from 'node:fs/promises';
import type { Logger } from 'pino';
import { EnvdError, invalidArgument, notFound } from '../errors.js';
import { processEnv } from '../env.js';
import type { EnvdState } from '../state.js';
import type { SystemUser } from '../users.js';
import type { SpawnSpec } from './backend.js';
import { ManagedProcess, type ProcessConfigView } from './managed-process.js';
import { PipeBackend } from './pipe-backend.js';
import { PtyBackend } from './pty-backend.js';

export interface StartOptions {
  config: ProcessConfigView;
  tag?: string;
  stdin?: boolean;
  pty?: { cols: number; rows: number };
}

export type Selector = { pid: number } | { tag: string };

/**
 * How long Connect still finds a process after it ended (E2B envd's terminatedRetentionTTL): a
 * client whose stream ended before the process did (a snapshot or fork closes the sandbox's
 * connections) connects again and learns the exit instead of "not found".
 */
const KEEP_ENDED_MS = 30_000;

const matches = (p: ManagedProcess, sel: Selector) => ('pid' in sel ? p.pid === sel.pid : p.tag === sel.tag);

/** Every process envd started and has not yet seen end, and those that ended a moment ago. */
export class ProcessManager {
  private readonly live = new Map<number, ManagedProcess>();
  private readonly ended = new Map<number, ManagedProcess>();

  constructor(
    private readonly state: EnvdState,
    private readonly logger: Logger,
  ) {}

  async start(opts: StartOptions, user: SystemUser): Promise<ManagedProcess> {
    const { config } = opts;
    if (!config.cmd) throw invalidArgument('process.cmd is required');
    const cwd = config.cwd
      ? this.state.resolvePath(config.cwd, user)
      : (this.state.defaultWorkdir ?? user.home);
    const cwdStat = await stat(cwd).catch(() => undefined);
    if (!cwdStat?.isDirectory()) throw invalidArgument(`cwd '${cwd}' does not exist or is not a directory`);

    const spec: SpawnSpec = {
      cmd: config.cmd,
      args: config.args,
      env: processEnv(user, this.state.envVars, config.envs),
      cwd,
      ...(user.uid !== 0 ? { uid: user.uid, gid: user.gid } : {}),
      // Older clients omit the field and expect stdin to stay open.
      stdin: opts.stdin ?? true,
      ...(opts.pty ? { pty: opts.pty } : {}),
    };
    const proc = new ManagedProcess(config, opts.tag);
    proc.backend = spec.pty ? PtyBackend.start(spec, proc) : await PipeBackend.start(spec, proc);
    const pid = proc.pid;
    this.live.set(pid, proc);
    // A reused pid or tag is the new process's from now on.
    for (const [p, old] of this.ended)
      if (p === pid || (opts.tag !== undefined && old.tag === opts.tag)) this.ended.delete(p);
    void proc.wait().then((end) => {
      this.live.delete(pid);
      this.keepEnded(proc);
      this.logger.debug({ pid, ...end }, 'process ended');
    });
    this.logger.debug({ pid, cmd: config.cmd, user: user.name }, 'process started');
    return proc;
  }

  get(selector: Selector): ManagedProcess {
    if ('pid' in selector) {
      const p = this.live.get(selector.pid);
      if (!p) throw notFound(`process with pid ${selector.pid} not found`);
      return p;
    }
    for (const p of this.live.values()) if (p.tag === selector.tag) return p;
    throw notFound(`process with tag '${selector.tag}' not found`);
  }

  /** The process to follow for Connect: a live one, else one that ended within KEEP_ENDED_MS. */
  connectable(selector: Selector): ManagedProcess {
    try {
      return this.get(selector);
    } catch (err) {
      for (const p of this.ended.values()) if (matches(p, selector)) return p;
      throw err;
    }
  }

  private keepEnded(proc: ManagedProcess): void {
    this.ended.set(proc.pid, proc);
    const timer = setTimeout(() => {
      if (this.ended.get(proc.pid) === proc) this.ended.delete(proc.pid);
    }, KEEP_ENDED_MS);
    timer.unref();
  }

  list(): ManagedProcess[] {
    return [...this.live.values()];
  }

  killAll(): void {
    for (const p of this.live.values()) {
      try {
        p.backend.signal('SIGKILL');
      } catch (err) {
        if (!(err instanceof EnvdError)) throw err;
      }
    }
  }
}
