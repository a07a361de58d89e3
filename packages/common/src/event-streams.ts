import { createHash } from 'node:crypto';
import { DomainError } from './errors.js';

/** How many event streams a server keeps open, and how much of one it holds for a slow client. */
export interface StreamLimits {
  /** Open streams in all. */
  readonly maxOpen: number;
  /** Open streams per API key. */
  readonly maxPerKey: number;
  /** Bytes a stream may leave unsent (the client is not reading) before it is closed. */
  readonly maxBufferedBytes: number;
}

export const DEFAULT_STREAM_LIMITS: StreamLimits = {
  maxOpen: 256,
  maxPerKey: 32,
  maxBufferedBytes: 1 << 20,
};

/** Seconds a refused client is asked to wait: streams end when their clients go. */
const RETRY_SECS = 5;

/** The response of an event stream, as HTTP/1 and HTTP/2 servers both give it. */
export interface StreamResponse {
  readonly writableLength: number;
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
  write(chunk: string): boolean;
  destroy(): void;
  once(event: 'close', listener: () => void): unknown;
}

/**
 * The event streams (server-sent events) a server has open: at most `maxOpen` in all and
 * `maxPerKey` per API key, a stream counted until its response closes; and what each may hold
 * unsent. Keys are kept as hashes, never as given.
 */
export class EventStreams {
  private open = 0;
  private readonly perKey = new Map<string, number>();

  constructor(readonly limits: StreamLimits = DEFAULT_STREAM_LIMITS) {}

  /**
   * Counts the stream `res` answers for `key` (the request's X-API-Key) until it closes, or
   * throws a capacity error (429 with Retry-After) when a limit is reached.
   */
  admit(key: string | undefined, res: StreamResponse): void {
    const { maxOpen, maxPerKey } = this.limits;
    const id = createHash('sha256')
      .update(key ?? '')
      .digest('hex');
    const mine = this.perKey.get(id) ?? 0;
    if (mine >= maxPerKey)
      throw new DomainError(
        'capacity',
        `this API key has ${maxPerKey} event streams open, the most it may; close one or retry later`,
        RETRY_SECS,
      );
    if (this.open >= maxOpen)
      throw new DomainError(
        'capacity',
        `${maxOpen} event streams are open, the most this server keeps`,
        RETRY_SECS,
      );
    this.open++;
    this.perKey.set(id, mine + 1);
    res.once('close', () => {
      this.open--;
      const left = (this.perKey.get(id) ?? 1) - 1;
      if (left > 0) this.perKey.set(id, left);
      else this.perKey.delete(id);
    });
  }

  /** Streams open now, in all. */
  get size(): number {
    return this.open;
  }

  /**
   * Writes `chunk` to a stream, unless its client has left more than `maxBufferedBytes` unread:
   * then the stream is closed instead, so that a client that does not read cannot make the
   * server hold its events without end. False when the stream is (now) closed.
   */
  write(res: StreamResponse, chunk: string): boolean {
    if (res.destroyed || res.writableEnded) return false;
    if (res.writableLength > this.limits.maxBufferedBytes) {
      res.destroy();
      return false;
    }
    res.write(chunk);
    return true;
  }
}
