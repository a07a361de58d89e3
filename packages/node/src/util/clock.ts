/** A timer set on a Clock; cancelling one that already ran is fine. */
export interface Timer {
  cancel(): void;
}

/**
 * Time as the node's logic sees it: what time it is and timers. Code that decides by time (TTL,
 * idle sandboxes, timeouts) takes a Clock, so tests move time forward instead of waiting for it.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` once after `ms`. Timers never keep the process alive. */
  after(ms: number, fn: () => void): Timer;
  /** Runs `fn` every `ms` until cancelled. */
  every(ms: number, fn: () => void): Timer;
}

/** The wall clock and Node's timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
  every(ms, fn) {
    const t = setInterval(fn, ms);
    t.unref();
    return { cancel: () => clearInterval(t) };
  },
};

/** `ms` (a Clock's now) as an ISO-8601 timestamp. */
export const isoTime = (ms: number): string => new Date(ms).toISOString();
