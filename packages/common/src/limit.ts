/** Runs jobs with at most `concurrency` at once, the rest in arrival order. */
export class Limiter {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly concurrency: number) {}

  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(job: () => Promise<T>): Promise<T> {
    if (this.running < this.concurrency) this.running++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await job();
    } finally {
      // A waiter takes the finished job's place; otherwise the place is free.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/**
 * Calls `fn` for every item, at most `limit` at once. After the first failure no further item
 * starts; `onFailure` hears of it at once (to abort the ones running), and it is thrown once
 * every started call has settled.
 */
export async function forEachLimit<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<unknown>,
  onFailure?: (err: unknown) => void,
): Promise<void> {
  const limiter = new Limiter(Math.max(1, limit));
  let failure: { err: unknown } | undefined;
  await Promise.all(
    items.map((item, i) =>
      limiter.run(async () => {
        if (failure) return;
        try {
          await fn(item, i);
        } catch (err) {
          if (failure) return;
          failure = { err };
          onFailure?.(err);
        }
      }),
    ),
  );
  if (failure) throw failure.err;
}
