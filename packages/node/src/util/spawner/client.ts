import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { Socket } from 'node:net';
import { withoutSecrets } from '@agentenv/common';
import { packageFile } from '../package-file.js';
import type { ProcessLauncher, ProcessOptions, ProcessResult } from '../subprocess.js';
import { parseReply, wireOptions, type SpawnerRequest } from './protocol.js';

/** The spawner's entry point: main.ts compiled, which the bundled binary starts too. */
export const SPAWNER_MAIN = packageFile('dist/util/spawner/main.js');
/** A small heap: fork() copies the caller's page tables, so the spawner stays cheap to fork from. */
const SPAWNER_FLAGS = ['--max-old-space-size=256', '--max-semi-space-size=2'];
/** How long close() lets the programs still running end (they get SIGTERM) before SIGKILL. */
const CLOSE_GRACE_MS = 5_000;

interface Pending {
  resolve(r: ProcessResult): void;
  reject(e: Error): void;
  /** Stops listening to the caller's abort signal. */
  release(): void;
}

/**
 * Starts programs from a small long-lived helper process instead of the node itself. Every
 * spawn from a process forks it, and the kernel copies the page tables of a node holding
 * hundreds of MiB: measured at 20–31 ms of a blocked event loop per spawn, against ~3 ms from
 * the helper. A fork ×16 that builds network slots makes over a hundred spawns; through the
 * helper they no longer queue behind each other on the node's event loop.
 *
 * The helper starts on first use and again after it died (the runs it had are rejected, as a
 * program that cannot be started is). It has its own process group, so a terminal's Ctrl-C
 * reaches only the node, which still needs it to pause sandboxes on the way out; it exits when
 * the node closes it or dies (its stdin closes).
 */
export class ProcessSpawner implements ProcessLauncher {
  private child: ChildProcess | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;

  constructor(private readonly main: string = SPAWNER_MAIN) {}

  run(file: string, args: readonly string[], opts: ProcessOptions = {}): Promise<ProcessResult> {
    if (this.closed) return Promise.reject(new Error('the process spawner is closed'));
    if (opts.onLine || opts.outputFd !== undefined)
      return Promise.reject(new Error('the process spawner collects output: no onLine or outputFd'));
    const child = this.child ?? this.start();
    const id = this.nextId++;
    return new Promise<ProcessResult>((resolve, reject) => {
      const cancel = () => this.send(child, { id, cancel: true });
      opts.signal?.addEventListener('abort', cancel, { once: true });
      this.pending.set(id, {
        resolve,
        reject,
        release: () => opts.signal?.removeEventListener('abort', cancel),
      });
      if (this.pending.size === 1) this.hold(child, true);
      this.send(child, { id, file, args, ...wireOptions(opts) });
      if (opts.signal?.aborted) cancel();
    });
  }

  /** The helper's pid while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Ends the helper once what it runs has ended (SIGTERM to those first); later runs are refused. */
  async close(): Promise<void> {
    this.closed = true;
    const child = this.child;
    if (!child) return;
    const closed = once(child, 'close');
    child.stdin?.end();
    const kill = setTimeout(() => child.kill('SIGKILL'), CLOSE_GRACE_MS);
    await closed;
    clearTimeout(kill);
  }

  private start(): ChildProcess {
    const child = spawn(process.execPath, [...SPAWNER_FLAGS, this.main], {
      // What it runs inherits this environment: no secrets in it.
      env: withoutSecrets(),
      stdio: ['pipe', 'pipe', 'inherit'],
      detached: true,
    });
    this.child = child;
    this.hold(child, false);
    // A write to a helper that just died fails with EPIPE; 'close' below rejects its runs.
    child.stdin!.on('error', () => undefined);
    createInterface({ input: child.stdout!, crlfDelay: Infinity }).on('line', (line) => {
      const reply = parseReply(line);
      const p = reply && this.pending.get(reply.id);
      if (!reply || !p) return;
      this.settle(child, reply.id);
      if ('result' in reply) p.resolve(reply.result);
      else p.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
    });
    const gone = (why: string) => {
      if (this.child !== child) return;
      this.child = undefined;
      const err = new Error(`the process spawner ${why}`);
      for (const [id, p] of [...this.pending]) {
        this.settle(child, id);
        p.reject(err);
      }
    };
    child.once('error', (err) => gone(`could not run: ${err.message}`));
    child.once('close', (code, signal) => gone(`exited (${signal ?? `code ${code}`})`));
    return child;
  }

  private send(child: ChildProcess, req: SpawnerRequest): void {
    child.stdin!.write(`${JSON.stringify(req)}\n`);
  }

  private settle(child: ChildProcess, id: number): void {
    this.pending.get(id)?.release();
    this.pending.delete(id);
    if (this.pending.size === 0) this.hold(child, false);
  }

  /** The helper keeps the node's event loop alive only while runs are waiting on it. */
  private hold(child: ChildProcess, on: boolean): void {
    for (const s of [child, child.stdin as Socket | null, child.stdout as Socket | null])
      if (on) s?.ref();
      else s?.unref();
  }
}
