import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { LayerCacheFullError } from './errors.js';
import type { LayerStore } from './layer-store.js';

/** One cached layer: its directory in the LayerStore, its disk use, when it was last used. */
export interface CacheEntry {
  readonly id: string;
  bytes: number;
  lastUsed: number;
}

export interface CacheUsage {
  readonly capacityBytes: number;
  readonly usedBytes: number;
  readonly pinnedBytes: number;
  readonly layers: number;
  readonly pinnedLayers: number;
}

interface IndexFile {
  readonly version: 1;
  readonly layers: CacheEntry[];
  readonly pins: Record<string, string[]>;
}

/** Ids of layers the cache manages inside the shared LayerStore (templates' own layers are not). */
export const OCI_LAYER_PREFIX = 'oci-';

/** Disk use of a tree (allocated blocks), for layers found on disk without an index entry. */
export async function diskUsage(path: string): Promise<number> {
  let total = 0;
  const seen = new Set<string>();
  const walk = async (p: string): Promise<void> => {
    const st = await lstat(p).catch(() => null);
    if (!st) return;
    const key = `${st.dev}:${st.ino}`;
    if (seen.has(key)) return;
    seen.add(key);
    total += st.blocks * 512;
    if (st.isDirectory()) {
      for (const name of await readdir(p).catch(() => [] as string[])) await walk(join(p, name));
    }
  };
  await walk(path);
  return total;
}

/**
 * A bounded cache over the OCI layers of a LayerStore. Every layer is accounted in bytes with its
 * last use; owners (templates, sandboxes, pulls in progress) pin the layers they need. When the
 * total exceeds the capacity, the least recently used unpinned layers are evicted (renamed aside
 * atomically, then deleted); if pinned layers alone exceed it, LayerCacheFullError. The index
 * (sizes, last use, durable pins) is kept in one JSON file and rebuilt from disk when missing.
 */
export class LayerCache {
  private readonly entries = new Map<string, CacheEntry>();
  private readonly durablePins = new Map<string, Set<string>>();
  private readonly transientPins = new Map<string, Set<string>>();
  private readonly evicting = new Map<string, Promise<void>>();
  private loaded: Promise<void> | null = null;
  private saving: Promise<void> = Promise.resolve();

  constructor(
    readonly store: LayerStore,
    readonly indexFile: string,
    readonly capacityBytes: number,
  ) {}

  /** Reads the index and reconciles it with the directories present (idempotent). */
  load(): Promise<void> {
    this.loaded ??= this.doLoad().catch((e: unknown) => {
      this.loaded = null;
      throw e;
    });
    return this.loaded;
  }

  private async doLoad(): Promise<void> {
    let idx: IndexFile | null = null;
    try {
      idx = JSON.parse(await readFile(this.indexFile, 'utf8')) as IndexFile;
    } catch {
      idx = null;
    }
    const names = new Set(
      (await readdir(this.store.root).catch(() => [] as string[])).filter((n) =>
        n.startsWith(OCI_LAYER_PREFIX),
      ),
    );
    for (const e of idx?.layers ?? []) {
      if (names.has(e.id) && (await this.store.has(e.id))) this.entries.set(e.id, { ...e });
    }
    for (const [owner, ids] of Object.entries(idx?.pins ?? {})) this.durablePins.set(owner, new Set(ids));
    for (const id of names) {
      if (this.entries.has(id) || !(await this.store.has(id))) continue;
      this.entries.set(id, { id, bytes: await diskUsage(this.store.dir(id)), lastUsed: 0 });
    }
    await this.save();
  }

  private save(): Promise<void> {
    const snapshot: IndexFile = {
      version: 1,
      layers: [...this.entries.values()],
      pins: Object.fromEntries([...this.durablePins].map(([o, s]) => [o, [...s]])),
    };
    this.saving = this.saving.then(async () => {
      await mkdir(dirname(this.indexFile), { recursive: true });
      const tmp = `${this.indexFile}.tmp-${randomBytes(4).toString('hex')}`;
      await writeFile(tmp, JSON.stringify(snapshot, null, 1));
      await rename(tmp, this.indexFile);
    });
    return this.saving;
  }

  has(id: string): boolean {
    return this.entries.has(id);
  }

  /** Waits until `id` is not being evicted (a pull pins first, then waits, then checks the store). */
  async settled(id: string): Promise<void> {
    await this.evicting.get(id);
  }

  /** Records a newly committed layer (or refreshes its size) and marks it used now. */
  async add(id: string, bytes: number): Promise<void> {
    this.entries.set(id, { id, bytes, lastUsed: Date.now() });
    await this.save();
  }

  /** Marks layers as used now (hot). */
  async touch(ids: readonly string[]): Promise<void> {
    const now = Date.now();
    for (const id of ids) {
      const e = this.entries.get(id);
      if (e) e.lastUsed = now;
    }
    await this.save();
  }

  /**
   * Holds `ids` for `owner` (replacing what it held) so eviction leaves them alone. Durable pins
   * (templates) survive restarts; transient ones (pulls in progress, running sandboxes) do not.
   */
  async pin(owner: string, ids: readonly string[], opts: { durable?: boolean } = {}): Promise<void> {
    const durable = opts.durable ?? true;
    (durable ? this.transientPins : this.durablePins).delete(owner);
    (durable ? this.durablePins : this.transientPins).set(owner, new Set(ids));
    if (durable) await this.save();
  }

  async unpin(owner: string): Promise<void> {
    this.transientPins.delete(owner);
    if (this.durablePins.delete(owner)) await this.save();
  }

  pinnedIds(): Set<string> {
    const out = new Set<string>();
    for (const s of [...this.durablePins.values(), ...this.transientPins.values()])
      for (const id of s) out.add(id);
    return out;
  }

  pins(): Record<string, string[]> {
    return Object.fromEntries(
      [...this.durablePins, ...this.transientPins].map(([owner, ids]) => [owner, [...ids]] as const),
    );
  }

  usage(): CacheUsage {
    const pinned = this.pinnedIds();
    let used = 0;
    let pinnedBytes = 0;
    let pinnedLayers = 0;
    for (const e of this.entries.values()) {
      used += e.bytes;
      if (pinned.has(e.id)) {
        pinnedBytes += e.bytes;
        pinnedLayers++;
      }
    }
    return {
      capacityBytes: this.capacityBytes,
      usedBytes: used,
      pinnedBytes,
      layers: this.entries.size,
      pinnedLayers,
    };
  }

  /**
   * Evicts least recently used unpinned layers until `extraBytes` more would fit. With
   * `strict`, failing to get there is a LayerCacheFullError; otherwise it is best effort.
   * Returns the ids evicted.
   */
  async makeRoom(extraBytes: number, opts: { strict?: boolean } = {}): Promise<string[]> {
    const pinned = this.pinnedIds();
    let used = this.usage().usedBytes;
    const victims: CacheEntry[] = [];
    if (used + extraBytes > this.capacityBytes) {
      const candidates = [...this.entries.values()]
        .filter((e) => !pinned.has(e.id) && !this.evicting.has(e.id))
        .sort((a, b) => a.lastUsed - b.lastUsed);
      for (const e of candidates) {
        if (used + extraBytes <= this.capacityBytes) break;
        victims.push(e);
        used -= e.bytes;
      }
    }
    // Chosen synchronously and marked before any await, so a pin arriving now waits for it.
    const jobs = victims.map((e) => {
      const job = this.remove(e.id).finally(() => this.evicting.delete(e.id));
      this.evicting.set(e.id, job);
      return job;
    });
    await Promise.all(jobs);
    if (victims.length) await this.save();
    if (opts.strict && used + extraBytes > this.capacityBytes) {
      throw new LayerCacheFullError(used + extraBytes, this.capacityBytes, this.usage().pinnedBytes);
    }
    return victims.map((e) => e.id);
  }

  /** Deletes a layer now: renamed aside first (atomic), so no reader sees half a layer. */
  async remove(id: string): Promise<void> {
    this.entries.delete(id);
    const aside = join(this.store.root, `.tmp-evict-${id}-${process.pid}-${randomBytes(4).toString('hex')}`);
    const moved = await rename(this.store.dir(id), aside).then(
      () => true,
      (e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT') return false;
        throw e;
      },
    );
    if (moved) await rm(aside, { recursive: true, force: true });
  }
}
