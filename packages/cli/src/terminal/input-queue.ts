/**
 * Forwards local input to a remote process one request at a time, in order. Chunks that arrive
 * while a request is in flight are merged into the next one, so typing fast does not queue one
 * request per keystroke. Nothing is sent before `open()` (the remote pid is not known yet).
 */
export class InputQueue {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private busy = false;
  private opened = false;
  private failed = false;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly send: (chunk: Uint8Array) => Promise<void>,
    private readonly onError: (err: unknown) => void,
    /** Above this many buffered bytes `full` is true: the caller should pause its source. */
    readonly highWaterMark = 1 << 20,
    /** The largest single request. */
    readonly maxChunk = 256 << 10,
    /** Called when the buffer drained below the high-water mark again. */
    private readonly onDrain: () => void = () => undefined,
  ) {}

  get full(): boolean {
    return this.pendingBytes >= this.highWaterMark;
  }

  push(chunk: Uint8Array): void {
    if (this.failed || chunk.length === 0) return;
    this.pending.push(Buffer.from(chunk));
    this.pendingBytes += chunk.length;
    void this.pump();
  }

  open(): void {
    this.opened = true;
    void this.pump();
  }

  /** Resolves once everything pushed so far was sent (or sending failed). */
  idle(): Promise<void> {
    if (!this.busy && (this.pending.length === 0 || this.failed)) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private take(): Buffer {
    const all = Buffer.concat(this.pending);
    const chunk = all.subarray(0, this.maxChunk);
    const rest = all.subarray(chunk.length);
    this.pending = rest.length ? [rest] : [];
    this.pendingBytes = rest.length;
    return chunk;
  }

  private async pump(): Promise<void> {
    if (this.busy || !this.opened || this.failed) return;
    this.busy = true;
    try {
      while (this.pending.length && !this.failed) {
        const wasFull = this.full;
        const chunk = this.take();
        if (wasFull && !this.full) this.onDrain();
        await this.send(chunk);
      }
    } catch (err) {
      this.failed = true;
      this.pending = [];
      this.pendingBytes = 0;
      this.onError(err);
    } finally {
      this.busy = false;
      const waiters = this.idleWaiters.splice(0);
      for (const w of waiters) w();
    }
  }
}
