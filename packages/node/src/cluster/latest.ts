/**
 * The newest value of something slow to gather (host stats, the cache's keys), for a loop that
 * must keep its own rhythm: get() waits for a fresh value at most `budgetMs` and otherwise
 * answers with the last one, while the gathering goes on and serves the next call. A heartbeat
 * that waited on file reads queued behind a busy node's I/O would arrive late, and the node
 * would be taken for dead.
 */
export class Latest<T> {
  private last: { value: T } | undefined;
  private gathering: Promise<T> | undefined;

  constructor(
    private readonly gather: () => Promise<T>,
    private readonly budgetMs: number,
  ) {}

  async get(): Promise<T> {
    const fresh = (this.gathering ??= this.gather()
      .then((value) => ((this.last = { value }), value))
      .finally(() => (this.gathering = undefined)));
    // Nothing to fall back on yet (or only a failure): the first value is worth waiting for.
    if (!this.last) return fresh;
    const last = this.last;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<T>((resolve) => (timer = setTimeout(() => resolve(last.value), this.budgetMs)));
    try {
      return await Promise.race([fresh.catch(() => last.value), late]);
    } finally {
      clearTimeout(timer);
    }
  }
}
