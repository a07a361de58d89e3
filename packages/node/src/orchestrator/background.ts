import type { Logger } from 'pino';
import type { Clock, Timer } from '../util/index.js';

/** Work the node does on its own, named for logs; `sandboxId` when it is about one sandbox. */
export interface BackgroundTask {
  readonly name: string;
  readonly sandboxId?: string;
  readonly startedAt: number;
}

/**
 * The node's background work: one-off tasks (reclaiming a dead sandbox, dropping a stored
 * pause) and periodic ones (the TTL sweep). Every task is tracked until it settles, so shutdown
 * can wait for them, callers can wait for a sandbox's tasks, and a failure is logged rather than
 * lost. A periodic task never overlaps itself.
 */
export class BackgroundWork {
  private readonly tasks = new Map<Promise<void>, BackgroundTask>();
  private readonly timers = new Set<Timer>();
  private readonly periodic = new Set<string>();
  private closed = false;

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Starts `work` now; returns when it settles (it never rejects: failures are logged). */
  run(name: string, sandboxId: string | undefined, work: () => Promise<void>): Promise<void> {
    const task: BackgroundTask = { name, ...(sandboxId ? { sandboxId } : {}), startedAt: this.clock.now() };
    const p: Promise<void> = Promise.resolve()
      .then(work)
      .catch((err: unknown) => this.logger.warn({ err, task: name, sandboxId }, 'background task failed'))
      .finally(() => this.tasks.delete(p));
    this.tasks.set(p, task);
    return p;
  }

  /**
   * Runs `work` every `ms`, skipping a beat while the previous run is still going. A second
   * periodic task of the same name is refused: two would overlap, which the skip is there to stop.
   */
  every(name: string, ms: number, work: () => Promise<void> | void): void {
    if (this.closed) return;
    if (this.periodic.has(name)) throw new Error(`periodic task ${name} is already running`);
    this.periodic.add(name);
    let running = false;
    const timer = this.clock.every(ms, () => {
      if (running || this.closed) return;
      running = true;
      void this.run(name, undefined, async () => work()).finally(() => (running = false));
    });
    this.timers.add(timer);
  }

  /** Tasks under way, optionally only a sandbox's. */
  pending(sandboxId?: string): BackgroundTask[] {
    return [...this.tasks.values()].filter((t) => sandboxId === undefined || t.sandboxId === sandboxId);
  }

  /**
   * Resolves once no task (optionally none of a sandbox's) runs, including tasks that the ones
   * running start meanwhile (a TTL sweep starts a pause per sandbox).
   */
  async idle(sandboxId?: string): Promise<void> {
    for (;;) {
      const waiting = [...this.tasks].filter(([, t]) => sandboxId === undefined || t.sandboxId === sandboxId);
      if (waiting.length === 0) return;
      await Promise.all(waiting.map(([p]) => p));
    }
  }

  /** Stops the periodic tasks and waits for whatever runs. */
  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) t.cancel();
    this.timers.clear();
    this.periodic.clear();
    await this.idle();
  }
}
