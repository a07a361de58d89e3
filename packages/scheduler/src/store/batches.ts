/** Most items one write takes. */
const MAX_BATCH = 1000;

/**
 * Writes items in batches without waiting to fill them: the first is written at once, and those
 * that come while a write is under way go together in the next. Each caller learns how its own
 * item's write went.
 */
export class Batches<T> {
  private readonly queue: { item: T; done: (err?: unknown) => void }[] = [];
  private writing = false;

  constructor(private readonly write: (items: T[]) => Promise<void>) {}

  put(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, done: (err) => (err === undefined ? resolve() : reject(err)) });
      if (!this.writing) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.writing = true;
    while (this.queue.length) {
      const batch = this.queue.splice(0, MAX_BATCH);
      let failed: unknown;
      try {
        await this.write(batch.map((b) => b.item));
      } catch (err) {
        failed = err ?? new Error('write failed');
      }
      for (const b of batch) b.done(failed);
    }
    this.writing = false;
  }
}
