import { createHash } from 'node:crypto';
import { DomainError } from '@agentenv/common';

/** A finished answer kept for retries of the same create. */
export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

interface Entry {
  fingerprint: string;
  answer: Promise<StoredAnswer>;
  expiresAt?: number;
}

export interface IdempotencyOptions {
  ttlMs: number;
  /** Keys kept at most; the oldest finished ones go first. */
  maxKeys: number;
  now?: () => number;
}

/** Hash of what a retry must repeat exactly: the method, the path and the body. */
export function fingerprint(method: string, path: string, body: string): string {
  return createHash('sha256').update(`${method} ${path}\n${body}`).digest('hex');
}

/**
 * `Idempotency-Key` for creates: the first request with a key runs, concurrent duplicates wait
 * for its answer, and later ones within the TTL get the same answer. Only successful answers are
 * kept — a refused create (429, a node error) may be retried with the same key. Reusing a key
 * for a different request is a conflict.
 */
export class IdempotencyStore {
  private readonly entries = new Map<string, Entry>();
  private readonly now: () => number;

  constructor(private readonly o: IdempotencyOptions) {
    this.now = o.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  async run(key: string, print: string, work: () => Promise<StoredAnswer>): Promise<StoredAnswer> {
    this.expire();
    const found = this.entries.get(key);
    if (found) {
      if (found.fingerprint !== print)
        throw new DomainError('conflict', `Idempotency-Key ${key} was used for a different request`);
      return found.answer;
    }
    const entry: Entry = { fingerprint: print, answer: work() };
    this.entries.set(key, entry);
    try {
      const answer = await entry.answer;
      if (answer.status >= 200 && answer.status < 300) entry.expiresAt = this.now() + this.o.ttlMs;
      else this.entries.delete(key);
      return answer;
    } catch (err) {
      this.entries.delete(key);
      throw err;
    }
  }

  private expire(): void {
    const now = this.now();
    for (const [k, e] of this.entries)
      if (e.expiresAt !== undefined && e.expiresAt <= now) this.entries.delete(k);
    // Map order is insertion order: the oldest keys are dropped first.
    for (const [k, e] of this.entries) {
      if (this.entries.size < this.o.maxKeys) break;
      if (e.expiresAt !== undefined) this.entries.delete(k);
    }
  }
}
