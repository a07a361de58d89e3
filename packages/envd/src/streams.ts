import { Code, ConnectError } from '@connectrpc/connect';

/**
 * A single-consumer async queue: producers push, one `for await` drains. Used to turn callback
 * sources (process output, file watchers) into the async iterables Connect streams are made of.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private wake: (() => void) | undefined;
  private closed = false;
  private failure: unknown;

  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.wake?.();
  }

  /** Ends the stream after the queued items; with an error, the consumer's loop throws it. */
  close(error?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    this.failure = error;
    this.wake?.();
  }

  get size(): number {
    return this.items.length;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift()!;
        continue;
      }
      if (this.closed) {
        if (this.failure !== undefined) throw this.failure;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}

/**
 * Interleaves `keepalive()` items into `source` after every `intervalMs` of silence, so proxies
 * and clients see the stream is alive. Stops when `source` ends or `signal` aborts.
 */
export async function* withKeepalive<T>(
  source: AsyncIterable<T>,
  intervalMs: number,
  keepalive: () => T,
  signal?: AbortSignal,
): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  let pending = it.next();
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const tick = new Promise<'tick'>((resolve) => (timer = setTimeout(() => resolve('tick'), intervalMs)));
      const r = await Promise.race([pending, tick]);
      clearTimeout(timer);
      if (signal?.aborted) return;
      if (r === 'tick') {
        yield keepalive();
        continue;
      }
      if (r.done) return;
      yield r.value;
      pending = it.next();
    }
  } finally {
    await it.return?.();
  }
}

/** E2B envd's keepalive interval for a stream whose request names none (permissions/keepalive.go). */
export const DEFAULT_KEEPALIVE_MS = 90_000;

/**
 * The Keepalive-Ping-Interval (seconds) of a request's headers in milliseconds, or E2B's default
 * when it names none: a silent stream (`sleep 600`) still sends bytes now and then, so no proxy or
 * client between the sandbox and its caller takes it for a dead connection.
 */
export function keepaliveIntervalMs(headers: Headers): number {
  const v = Number(headers.get('keepalive-ping-interval'));
  return Number.isFinite(v) && v > 0 ? Math.min(v, 3600) * 1000 : DEFAULT_KEEPALIVE_MS;
}

/**
 * How a server stream whose request was aborted ends, as in E2B's envd (its handlers return
 * `ctx.Err()`): with the abort's error, `deadline_exceeded` once the request's Connect-Timeout-Ms
 * has passed, instead of a clean end the client would take for a finished stream (the Python SDK
 * then reports "Command ended without an end event" rather than a timeout). Nothing when the
 * signal was not aborted.
 */
export function abortError(signal: AbortSignal): ConnectError | undefined {
  return signal.aborted ? ConnectError.from(signal.reason, Code.Canceled) : undefined;
}
