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

/**
 * Calls `check` until it gives a value (anything but undefined or false) and returns it; after
 * `timeoutMs` it fails naming `what`, with the last error `check` threw, if any. Made for what a
 * test waits on outside its process (daemons, containers, peers): by default it waits 2 min,
 * every 250 ms.
 */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  opts: EventuallyOptions = {},
): Promise<Exclude<T, undefined | false>> {
  let last: unknown;
  return eventually(
    async () => {
      const value = await check().catch((err: unknown) => {
        last = err;
        return undefined;
      });
      if (value === undefined || value === false)
        throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
      return value as Exclude<T, undefined | false>;
    },
    { timeoutMs: 120_000, intervalMs: 250, ...opts },
  );
}
