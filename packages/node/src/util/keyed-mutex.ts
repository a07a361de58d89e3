/** Serialises async work per key: operations on one sandbox run one after another. */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }

  /** Resolves when the work queued for `key` so far has finished. */
  idle(key: string): Promise<void> {
    return (this.tails.get(key) ?? Promise.resolve()).then(() => undefined);
  }
}
