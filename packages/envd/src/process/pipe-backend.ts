import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { EnvdError } from '../errors.js';
import type { BackendEvents, ProcessBackend, SpawnSpec } from './backend.js';
import { processEnd } from './events.js';

/**
 * How long to keep reading stdout/stderr after the process exits. Output still in the pipe is
 * delivered, but a background grandchild that inherited the pipe (`cmd &`) cannot hold the
 * command open, which is what clients of E2B's Go envd are used to.
 */
const DRAIN_AFTER_EXIT_MS = 250;

/** Kills the whole process group: `bash -c` children must not outlive a kill. */
export function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  }
}

export class PipeBackend implements ProcessBackend {
  readonly isPty = false;
  private constructor(
    private readonly child: ChildProcess,
    readonly pid: number,
  ) {}

  /** Resolves once the child runs; a missing binary or bad cwd rejects instead. */
  static start(spec: SpawnSpec, events: BackendEvents): Promise<PipeBackend> {
    const child = spawn(spec.cmd, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      uid: spec.uid,
      gid: spec.gid,
      // Own session and process group, so signals reach the command's children too.
      detached: true,
      stdio: [spec.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    return new Promise((resolve, reject) => {
      child.once('error', (err: NodeJS.ErrnoException) => {
        reject(new EnvdError('invalid_argument', `failed to start '${spec.cmd}': ${err.message}`));
      });
      child.once('spawn', () => {
        const backend = new PipeBackend(child, child.pid!);
        backend.wire(events);
        resolve(backend);
      });
    });
  }

  private wire(events: BackendEvents): void {
    const out = this.child.stdout!;
    const err = this.child.stderr!;
    out.on('data', (d: Buffer) => events.onData('stdout', d));
    err.on('data', (d: Buffer) => events.onData('stderr', d));
    this.child.stdin?.on('error', () => {
      // EPIPE after the child exits or closes its stdin: nothing to report.
    });
    this.child.once('exit', (code, signal) => {
      const drained = [out, err].map(
        (s: Readable) =>
          new Promise<void>((resolve) => {
            if (s.readableEnded || s.destroyed) return resolve();
            s.once('end', resolve).once('close', resolve);
          }),
      );
      const timer = new Promise<void>((resolve) => setTimeout(resolve, DRAIN_AFTER_EXIT_MS).unref());
      void Promise.race([Promise.all(drained), timer]).then(() => {
        out.destroy();
        err.destroy();
        this.child.stdin?.destroy();
        events.onEnd(processEnd(code, signal));
      });
    });
  }

  writeInput(data: Uint8Array): void {
    const stdin = this.child.stdin;
    if (!stdin || stdin.writableEnded || stdin.destroyed) {
      throw new EnvdError('failed_precondition', 'stdin of this process is closed or was not requested');
    }
    stdin.write(data);
  }

  closeInput(): void {
    this.child.stdin?.end();
  }

  resize(): void {
    throw new EnvdError('invalid_argument', 'the process has no terminal to resize');
  }

  signal(sig: 'SIGTERM' | 'SIGKILL'): void {
    signalGroup(this.pid, sig);
  }

  pauseOutput(): void {
    this.child.stdout?.pause();
    this.child.stderr?.pause();
  }

  resumeOutput(): void {
    this.child.stdout?.resume();
    this.child.stderr?.resume();
  }
}
