import { spawn as spawnPty, type IPty } from 'node-pty';
import { EnvdError } from '../errors.js';
import type { BackendEvents, ProcessBackend, SpawnSpec } from './backend.js';
import { processEnd } from './events.js';
import { signalGroup } from './pipe-backend.js';

const SIGNAL_NAMES: Record<number, NodeJS.Signals> = {
  1: 'SIGHUP',
  2: 'SIGINT',
  9: 'SIGKILL',
  15: 'SIGTERM',
};

/** A process on a pseudo-terminal (node-pty), for interactive shells. */
export class PtyBackend implements ProcessBackend {
  readonly isPty = true;
  private closed = false;

  private constructor(private readonly pty: IPty) {}

  get pid(): number {
    return this.pty.pid;
  }

  static start(spec: SpawnSpec, events: BackendEvents): PtyBackend {
    const size = spec.pty!;
    let pty: IPty;
    try {
      pty = spawnPty(spec.cmd, spec.args, {
        name: spec.env.TERM ?? 'xterm-256color',
        cols: Math.max(1, size.cols || 80),
        rows: Math.max(1, size.rows || 24),
        cwd: spec.cwd,
        env: spec.env,
        uid: spec.uid,
        gid: spec.gid,
        // Raw bytes: terminal output is not always valid UTF-8 at chunk boundaries.
        encoding: null,
      });
    } catch (err) {
      throw new EnvdError('invalid_argument', `failed to start '${spec.cmd}': ${(err as Error).message}`);
    }
    const backend = new PtyBackend(pty);
    pty.onData((d) => events.onData('pty', d as unknown as Buffer));
    pty.onExit(({ exitCode, signal }) => {
      backend.closed = true;
      events.onEnd(processEnd(signal ? null : exitCode, signal ? (SIGNAL_NAMES[signal] ?? 'SIGKILL') : null));
    });
    return backend;
  }

  writeInput(data: Uint8Array): void {
    if (this.closed) throw new EnvdError('failed_precondition', 'the terminal is closed');
    this.pty.write(Buffer.from(data) as unknown as string);
  }

  closeInput(): void {
    // EOF on a terminal is Ctrl-D typed by the client; there is no stdin to close.
  }

  resize(cols: number, rows: number): void {
    if (
      !Number.isInteger(cols) ||
      !Number.isInteger(rows) ||
      cols < 1 ||
      rows < 1 ||
      cols > 10000 ||
      rows > 10000
    ) {
      throw new EnvdError('invalid_argument', `invalid terminal size ${cols}x${rows}`);
    }
    if (!this.closed) this.pty.resize(cols, rows);
  }

  signal(sig: 'SIGTERM' | 'SIGKILL'): void {
    signalGroup(this.pid, sig);
  }

  pauseOutput(): void {
    this.pty.pause();
  }

  resumeOutput(): void {
    this.pty.resume();
  }
}
