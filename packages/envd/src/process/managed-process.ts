import type { ProcessBackend } from './backend.js';
import type { ProcessEnd, ProcessOutput } from './events.js';
import { Subscriber } from './subscriber.js';

/** Output held per subscriber before the child's output is paused. */
const HIGH_WATER = 4 << 20;
/** Output held before the first subscriber arrives (the Start stream subscribes right away). */
const EARLY_LIMIT = 1 << 20;

export interface ProcessConfigView {
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

/**
 * A process started by envd and the streams watching it. Output fans out to every subscriber;
 * a subscriber that falls behind pauses reading from the child rather than growing memory.
 * Output before the first subscriber is kept (bounded), so the Start stream misses nothing.
 */
export class ManagedProcess {
  private readonly subscribers = new Set<Subscriber>();
  private early: ProcessOutput[] | undefined = [];
  private earlyBytes = 0;
  private paused = false;
  private endInfo: ProcessEnd | undefined;
  private readonly endWaiters: ((end: ProcessEnd) => void)[] = [];
  backend!: ProcessBackend;

  constructor(
    readonly config: ProcessConfigView,
    readonly tag: string | undefined,
  ) {}

  get pid(): number {
    return this.backend.pid;
  }

  get ended(): ProcessEnd | undefined {
    return this.endInfo;
  }

  onData(stream: 'stdout' | 'stderr' | 'pty', data: Uint8Array): void {
    this.emit({ kind: 'data', stream, data });
  }

  onEnd(end: ProcessEnd): void {
    this.endInfo = end;
    this.emit({ kind: 'end', end });
    for (const s of this.subscribers) s.close();
    this.subscribers.clear();
    for (const w of this.endWaiters.splice(0)) w(end);
  }

  /** SIGKILLs the process group after `ms` unless it ends first. */
  killAfter(ms: number): void {
    const timer = setTimeout(() => this.backend.signal('SIGKILL'), Math.max(0, ms));
    timer.unref();
    void this.wait().then(() => clearTimeout(timer));
  }

  /** Resolves when the process has ended and its output has been delivered to subscribers. */
  wait(): Promise<ProcessEnd> {
    if (this.endInfo) return Promise.resolve(this.endInfo);
    return new Promise((resolve) => this.endWaiters.push(resolve));
  }

  /** A live view of output from now on (plus early output, for the first subscriber). */
  subscribe(): Subscriber {
    const sub = new Subscriber(() => this.relieve());
    const early = this.early;
    this.early = undefined;
    for (const ev of early ?? []) sub.push(ev);
    if (this.endInfo) {
      // The early buffer already holds the end event when nobody had subscribed yet.
      if (!early) sub.push({ kind: 'end', end: this.endInfo });
      sub.close();
      return sub;
    }
    this.subscribers.add(sub);
    return sub;
  }

  unsubscribe(sub: Subscriber): void {
    this.subscribers.delete(sub);
    sub.close();
    this.relieve();
  }

  private emit(ev: ProcessOutput): void {
    if (this.early) {
      if (ev.kind === 'data') {
        if (this.earlyBytes + ev.data.length > EARLY_LIMIT) return;
        this.earlyBytes += ev.data.length;
      }
      this.early.push(ev);
      return;
    }
    for (const s of this.subscribers) {
      s.push(ev);
      if (s.backlog > HIGH_WATER && !this.paused) {
        this.paused = true;
        this.backend.pauseOutput();
      }
    }
  }

  private relieve(): void {
    if (!this.paused) return;
    for (const s of this.subscribers) if (s.backlog > HIGH_WATER / 2) return;
    this.paused = false;
    this.backend.resumeOutput();
  }
}
