export interface EventuallyOptions {
  /** Give up after this long and rethrow the last failure (default 10 s). */
  readonly timeoutMs?: number;
  /** Pause between attempts (default 100 ms). */
  readonly intervalMs?: number;
}

/**
 * Calls `fn` until it returns without throwing (an assertion that passes, a value that is
 * ready) and returns what it returned; after `timeoutMs` the last error is thrown. Tests wait
 * on conditions with it instead of sleeping.
 */
export async function eventually<T>(fn: () => T | Promise<T>, opts: EventuallyOptions = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  const interval = opts.intervalMs ?? 100;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() + interval > deadline) throw err;
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}
