import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { SnapshotError } from './errors.js';
import type { LockBody, Repository } from './repository.js';

export interface LeaseOptions {
  /** A lock not refreshed for this long belongs to a dead holder (default 2 min). */
  readonly ttlMs?: number;
  /** How long a writer waits for a collection to step aside (default 5 min). */
  readonly waitMs?: number;
  readonly pollMs?: number;
}

/**
 * Coordination between writers (captures being stored) and the garbage collector, across
 * processes and nodes, with nothing but the repository's own objects.
 *
 * The danger is a writer that finds a chunk present (so does not upload it) while a collection,
 * which did not see the writer's record yet, deletes that chunk. So: a writer holds a shared lock
 * from before its first "is it there?" until its record is committed; a collection holds an
 * exclusive one. Each side writes its lock first and then lists the locks (write-then-check: of
 * two that race, at least one sees the other). A collection that sees a writer stops, and checks
 * again before every batch of deletions; a writer that sees a collection waits for it to go,
 * which takes at most one batch because the collection sees the writer's lock. Writers never wait
 * for each other. Locks carry an expiry refreshed by their holder, so a crashed holder blocks
 * nobody for longer than ttlMs. (Clocks of nodes are assumed to agree within a fraction of ttlMs.)
 */
export class Leases {
  private readonly ttlMs: number;
  private readonly waitMs: number;
  private readonly pollMs: number;
  private readonly owner = `${hostname()}:${process.pid}`;

  constructor(
    private readonly repo: Repository,
    opts: LeaseOptions = {},
  ) {
    this.ttlMs = opts.ttlMs ?? 120_000;
    this.waitMs = opts.waitMs ?? 300_000;
    this.pollMs = opts.pollMs ?? 200;
  }

  private async hold(kind: LockBody['kind']): Promise<{ name: string; release: () => Promise<void> }> {
    const name = `${kind}-${randomBytes(8).toString('hex')}`;
    const write = () =>
      this.repo.putLock(name, { kind, owner: this.owner, expiresAt: Date.now() + this.ttlMs });
    await write();
    let refreshing: Promise<void> = Promise.resolve();
    const timer = setInterval(
      () => {
        refreshing = write().catch(() => undefined);
      },
      Math.max(10, Math.floor(this.ttlMs / 3)),
    );
    timer.unref();
    return {
      name,
      release: async () => {
        clearInterval(timer);
        await refreshing;
        await this.repo.deleteLock(name).catch(() => undefined);
      },
    };
  }

  /** Live locks of `kind` other than `self`; stale ones are removed on the way. */
  private async others(kind: LockBody['kind'], self: string): Promise<number> {
    let n = 0;
    for (const l of await this.repo.listLocks()) {
      if (l.name === self) continue;
      if (!(l.body.expiresAt > Date.now())) {
        await this.repo.deleteLock(l.name).catch(() => undefined);
        continue;
      }
      if (l.body.kind === kind) n++;
    }
    return n;
  }

  /** Runs `fn` as a writer: no collection deletes anything while it runs. */
  async shared<T>(fn: () => Promise<T>): Promise<T> {
    const lock = await this.hold('shared');
    try {
      const deadline = Date.now() + this.waitMs;
      while ((await this.others('exclusive', lock.name)) > 0) {
        if (Date.now() > deadline) {
          throw new SnapshotError(
            'busy',
            `snapshot repository ${this.repo.location} is held by a garbage collection`,
          );
        }
        await new Promise((r) => setTimeout(r, this.pollMs));
      }
      return await fn();
    } finally {
      await lock.release();
    }
  }

  /**
   * Runs `fn` as the collector, or returns null at once when a writer holds the repository.
   * `fn` must call `stillAlone()` before each batch of deletions and stop when it says false.
   */
  async exclusive<T>(fn: (stillAlone: () => Promise<boolean>) => Promise<T>): Promise<T | null> {
    const lock = await this.hold('exclusive');
    try {
      const alone = async () => (await this.others('shared', lock.name)) === 0;
      if (!(await alone())) return null;
      return await fn(alone);
    } finally {
      await lock.release();
    }
  }
}
