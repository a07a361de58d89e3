import { cp, mkdir, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { readCapture, CAPTURE_META_FILE } from './capture.js';
import type { Capture } from './capture-meta.js';
import { CacheFullError, SnapshotError } from './errors.js';
import { checkSnapshotId, isSnapshotId } from './repository-keys.js';
import type { SnapshotStore } from './store.js';

export interface RuntimeCacheOptions {
  /** Node-local directory (e.g. $AENV_HOME/snapshot-cache); one cache per node process. */
  readonly dir: string;
  readonly capacityBytes: number;
  readonly store: SnapshotStore;
}

interface Entry {
  readonly id: string;
  readonly capture: Capture;
  readonly bytes: number;
  lastUsed: number;
}

export interface CacheStats {
  readonly capacityBytes: number;
  readonly usedBytes: number;
  readonly entries: readonly { id: string; bytes: number; pins: number }[];
}

async function captureBytes(c: Capture): Promise<number> {
  const metaBytes = (await stat(join(c.dir, CAPTURE_META_FILE))).size;
  return c.meta.files.reduce((n, f) => n + f.bytes, metaBytes);
}

/**
 * The runtime cache: capture directories of snapshots, materialized on this node for restores,
 * bounded in bytes. It is only a copy of the repository: anything missing is rebuilt from it, and
 * whatever a previous process left is re-indexed at open (incomplete directories dropped).
 *
 * Entries that a live sandbox holds are pinned (reference counted) and never evicted; the least
 * recently used unpinned entries go first. When only pinned entries are left and a new one does not
 * fit, the caller gets a CacheFullError instead of losing something in use. Callers restoring
 * from an entry should hold it with `acquire` (pin + get), or an eviction may remove the
 * directory under them.
 */
export class RuntimeCache {
  readonly dir: string;
  readonly capacityBytes: number;
  private readonly store: SnapshotStore;
  private readonly entries = new Map<string, Entry>();
  private readonly pins = new Map<string, number>();
  private readonly loading = new Map<string, Promise<Capture>>();
  /** Bytes promised to entries being materialized. */
  private reserved = 0;
  private clock = 0;

  constructor(opts: RuntimeCacheOptions) {
    if (!Number.isSafeInteger(opts.capacityBytes) || opts.capacityBytes <= 0) {
      throw new SnapshotError('config', 'runtime cache capacity must be a positive number of bytes');
    }
    this.dir = opts.dir;
    this.capacityBytes = opts.capacityBytes;
    this.store = opts.store;
  }

  get usedBytes(): number {
    let n = 0;
    for (const e of this.entries.values()) n += e.bytes;
    return n;
  }

  stats(): CacheStats {
    return {
      capacityBytes: this.capacityBytes,
      usedBytes: this.usedBytes,
      entries: [...this.entries.values()].map((e) => ({
        id: e.id,
        bytes: e.bytes,
        pins: this.pins.get(e.id) ?? 0,
      })),
    };
  }

  /** Indexes what a previous process left (oldest first) and removes incomplete or foreign entries. */
  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const found: { entry: Omit<Entry, 'lastUsed'>; mtimeMs: number }[] = [];
    for (const name of await readdir(this.dir)) {
      const path = join(this.dir, name);
      const capture = isSnapshotId(name) ? await readCapture(path).catch(() => null) : null;
      if (!capture) {
        await rm(path, { recursive: true, force: true });
        continue;
      }
      const st = await stat(path);
      found.push({ entry: { id: name, capture, bytes: await captureBytes(capture) }, mtimeMs: st.mtimeMs });
    }
    found.sort((a, b) => a.mtimeMs - b.mtimeMs);
    for (const f of found) this.entries.set(f.entry.id, { ...f.entry, lastUsed: ++this.clock });
    const over = this.usedBytes - this.capacityBytes;
    if (over > 0) await this.removeAll(this.pickVictims(over));
  }

  has(id: string): boolean {
    return this.entries.has(id);
  }

  /** Keeps `id` from eviction (counted: every pin needs an unpin). Works before it is cached too. */
  pin(id: string): void {
    this.pins.set(checkSnapshotId(id), (this.pins.get(id) ?? 0) + 1);
  }

  unpin(id: string): void {
    const n = (this.pins.get(id) ?? 0) - 1;
    if (n > 0) this.pins.set(id, n);
    else this.pins.delete(id);
  }

  /** The capture of snapshot `id` (an id, not a name), materialized from the repository on a miss. */
  async get(id: string): Promise<Capture> {
    checkSnapshotId(id);
    const hit = this.entries.get(id);
    if (hit) {
      hit.lastUsed = ++this.clock;
      const now = new Date();
      await utimes(hit.capture.dir, now, now).catch(() => undefined);
      return hit.capture;
    }
    let p = this.loading.get(id);
    if (!p) {
      p = this.load(id).finally(() => this.loading.delete(id));
      this.loading.set(id, p);
    }
    return p;
  }

  /** get() while pinned; `release` unpins (once). */
  async acquire(id: string): Promise<{ capture: Capture; release: () => void }> {
    this.pin(id);
    try {
      const capture = await this.get(id);
      let released = false;
      return {
        capture,
        release: () => {
          if (!released) this.unpin(id);
          released = true;
        },
      };
    } catch (e) {
      this.unpin(id);
      throw e;
    }
  }

  private async load(id: string): Promise<Capture> {
    const record = await this.store.getRecord(id);
    if (record.id !== id) throw new SnapshotError('invalid', `${id} is a name, not a snapshot id`);
    const need = record.bytesTotal + 64 * 1024; // + capture.json
    await this.makeRoom(id, need);
    try {
      const dest = join(this.dir, id);
      await rm(dest, { recursive: true, force: true });
      const capture = await this.store.materialize(id, dest);
      this.entries.set(id, { id, capture, bytes: await captureBytes(capture), lastUsed: ++this.clock });
      return capture;
    } finally {
      this.reserved -= need;
    }
  }

  /**
   * Moves a capture directory that was just stored as snapshot `id` into the cache, so restoring
   * or forking from it needs no rebuild and reads the very files (inodes, page cache) the
   * checkpoint wrote: a rename on the same filesystem. Only across filesystems (EXDEV) are the
   * bytes copied, into a sibling renamed into place, so the entry is complete or absent. The
   * directory is gone from where it was afterwards. CacheFullError leaves it in place.
   */
  async adopt(id: string, captureDir: string): Promise<Capture> {
    checkSnapshotId(id);
    const existing = this.entries.get(id);
    if (existing) {
      await rm(captureDir, { recursive: true, force: true });
      return existing.capture;
    }
    const src = await readCapture(captureDir);
    const bytes = await captureBytes(src);
    await this.makeRoom(id, bytes);
    const dest = join(this.dir, id);
    try {
      await rm(dest, { recursive: true, force: true });
      await rename(captureDir, dest).catch(async (e: NodeJS.ErrnoException) => {
        if (e.code !== 'EXDEV') throw e;
        await copyInto(captureDir, dest);
        await rm(captureDir, { recursive: true, force: true });
      });
      const capture: Capture = { dir: dest, meta: src.meta };
      this.entries.set(id, { id, capture, bytes, lastUsed: ++this.clock });
      return capture;
    } finally {
      this.reserved -= bytes;
    }
  }

  /** adopt(), or false when the cache has no room (the directory then stays where it is). */
  async offer(id: string, captureDir: string): Promise<boolean> {
    try {
      await this.adopt(id, captureDir);
      return true;
    } catch (e) {
      if (e instanceof CacheFullError) return false;
      throw e;
    }
  }

  /** Drops an entry (e.g. its snapshot was deleted); false when it is pinned or absent. */
  async remove(id: string): Promise<boolean> {
    const e = this.entries.get(id);
    if (!e || (this.pins.get(id) ?? 0) > 0) return false;
    this.entries.delete(id);
    await rm(e.capture.dir, { recursive: true, force: true });
    return true;
  }

  /**
   * Reserves `bytes` for `id`, evicting least recently used unpinned entries. The choice is made
   * synchronously, so concurrent callers never pick the same victim or overcommit.
   */
  private async makeRoom(id: string, bytes: number): Promise<void> {
    if (bytes > this.capacityBytes) {
      throw new CacheFullError(
        `snapshot ${id} needs ${bytes} bytes but the runtime cache ${this.dir} holds at most ${this.capacityBytes}`,
      );
    }
    const over = this.usedBytes + this.reserved + bytes - this.capacityBytes;
    const victims = over > 0 ? this.pickVictims(over) : [];
    const freed = victims.reduce((n, e) => n + e.bytes, 0);
    if (freed < over) {
      const pinned = [...this.entries.values()].filter((e) => (this.pins.get(e.id) ?? 0) > 0);
      throw new CacheFullError(
        `runtime cache ${this.dir} is full: ${pinned.length} snapshot(s) in use hold ${pinned.reduce((n, e) => n + e.bytes, 0)} of ${this.capacityBytes} bytes` +
          `${this.reserved ? ` and ${this.reserved} bytes are being materialized` : ''}; cannot make room for snapshot ${id} (${bytes} bytes)`,
      );
    }
    for (const v of victims) this.entries.delete(v.id);
    this.reserved += bytes;
    await this.removeAll(victims).catch(() => undefined);
  }

  /** Least recently used unpinned entries adding up to at least `bytes` (fewer if there are not enough). */
  private pickVictims(bytes: number): Entry[] {
    const candidates = [...this.entries.values()]
      .filter((e) => (this.pins.get(e.id) ?? 0) === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed);
    const out: Entry[] = [];
    let n = 0;
    for (const e of candidates) {
      if (n >= bytes) break;
      out.push(e);
      n += e.bytes;
    }
    return out;
  }

  private async removeAll(victims: Entry[]): Promise<void> {
    for (const v of victims) {
      this.entries.delete(v.id);
      await rm(v.capture.dir, { recursive: true, force: true });
    }
  }
}

/** A copy of directory `src` at `dest`, assembled beside it and renamed: complete or absent. */
async function copyInto(src: string, dest: string): Promise<void> {
  const partial = `${dest}.partial-${randomBytes(4).toString('hex')}`;
  try {
    await cp(src, partial, { recursive: true });
    await rename(partial, dest);
  } catch (e) {
    await rm(partial, { recursive: true, force: true });
    throw e;
  }
}
