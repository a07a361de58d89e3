/**
 * Keeps up to `size` ready items, created in the background one at a time (slot creation spawns a
 * handful of processes; doing it serially keeps the refill from competing with running sandboxes
 * for CPU). After a failed creation it waits for the next take() or fill() instead of retrying in
 * a loop against a broken host.
 */
export interface WarmPoolOptions<T> {
  readonly size: number;
  create(): Promise<T>;
  destroy(item: T): Promise<void>;
  onError(error: unknown): void;
}

export class WarmPool<T> {
  readonly #options: WarmPoolOptions<T>;
  readonly #ready: T[] = [];
  #creating = false;
  #closed = false;
  #idle: (() => void)[] = [];

  constructor(options: WarmPoolOptions<T>) {
    this.#options = options;
  }

  get ready(): number {
    return this.#ready.length;
  }

  get creating(): boolean {
    return this.#creating;
  }

  /** A ready item, if any; starts a refill either way. */
  take(): T | undefined {
    const item = this.#ready.shift();
    this.fill();
    return item;
  }

  /**
   * Takes back an item whose user is done with it (a recycled one); false: the caller disposes of
   * it. Up to twice the size are kept: a take() refills at once, so a pool whose items come back
   * would otherwise be full each time one does, and build a new item for every one it throws away.
   */
  put(item: T): boolean {
    if (!this.hasRoom) return false;
    this.#ready.push(item);
    return true;
  }

  /** Whether put() would take an item now. */
  get hasRoom(): boolean {
    return !this.#closed && this.#ready.length < 2 * this.#options.size;
  }

  fill(): void {
    if (this.#closed || this.#creating || this.#ready.length >= this.#options.size) return;
    this.#creating = true;
    void this.#createOne();
  }

  async #createOne(): Promise<void> {
    let failed = false;
    try {
      const item = await this.#options.create();
      if (this.#closed) await this.#options.destroy(item);
      else this.#ready.push(item);
    } catch (error) {
      failed = true;
      this.#options.onError(error);
    } finally {
      this.#creating = false;
    }
    if (!failed) this.fill();
    if (!this.#creating) for (const resolve of this.#idle.splice(0)) resolve();
  }

  /** Resolves once no creation is in flight (the pool is full, failed, or closed). */
  whenIdle(): Promise<void> {
    if (!this.#creating) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Stops refilling, waits for the creation in flight and hands back the ready items. */
  async close(): Promise<T[]> {
    this.#closed = true;
    await this.whenIdle();
    return this.#ready.splice(0);
  }
}
