/** Runs jobs with at most `concurrency` at once, the rest in arrival order. */
export class BuildQueue {
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
