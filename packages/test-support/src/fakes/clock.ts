import type { Clock, Timer } from '@agentenv/node';

interface Pending {
  at: number;
  fn: () => void;
  every?: number;
  cancelled: boolean;
}

/** A clock that moves only when the test says: `advance(ms)` runs the timers that fall due. */
export class FakeClock implements Clock {
  private time: number;
  private readonly timers: Pending[] = [];

  constructor(start = Date.parse('2026-01-01T00:00:00.000Z')) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  after(ms: number, fn: () => void): Timer {
    return this.add({ at: this.time + ms, fn, cancelled: false });
  }

  every(ms: number, fn: () => void): Timer {
    return this.add({ at: this.time + ms, fn, every: Math.max(1, ms), cancelled: false });
  }

  /** Moves time forward by `ms`, running each timer due on the way, in order. */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      const next = this.timers.filter((t) => !t.cancelled && t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.time = next.at;
      if (next.every) next.at += next.every;
      else next.cancelled = true;
      next.fn();
    }
    this.time = end;
  }

  /** Timers still set. */
  get pending(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  private add(t: Pending): Timer {
    this.timers.push(t);
    return { cancel: () => (t.cancelled = true) };
  }
}
