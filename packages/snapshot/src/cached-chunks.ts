import { open } from 'node:fs/promises';
import { join } from 'node:path';
import type { RuntimeCache } from './cache.js';
import type { ChunkSession, ChunkSource } from './chunk-source.js';
import type { ChunkRef } from './manifest.js';
import { sha256 } from './manifest.js';
import type { SnapshotStore } from './store.js';
import { SnapshotNotFoundError } from './errors.js';

const RETRY_INDEX_MS = 60_000;
/**
 * An entry whose record is not in the repository yet (a snapshot its node answered before storing
 * it): looked at again soon, since it is indexed from the record once the store commits.
 */
const RETRY_UNSTORED_MS = 1_000;

interface Location {
  readonly dir: string;
  readonly file: string;
  readonly offset: number;
  readonly bytes: number;
}

interface EntryIndex {
  readonly locations: ReadonlyMap<string, Location>;
  /** The capture's distinct chunk hashes, ascending. */
  readonly sorted: readonly string[];
}

/**
 * The chunks of the captures in this node's runtime cache, found by hash: a capture being
 * materialised takes the chunks it shares with cached ones from local disk, and peers are
 * served from here. Each cached capture is indexed from its manifest the first time it is seen;
 * an entry the cache evicted is forgotten at the next lookup (and a read racing the eviction is
 * a miss, never wrong bytes: callers check every chunk's hash).
 */
export class CachedChunks implements ChunkSource {
  readonly name = 'cache';
  private readonly byEntry = new Map<string, EntryIndex>();
  /** Entries whose manifest could not be read, and when to try again. */
  private readonly retryAt = new Map<string, number>();
  private refreshing: Promise<void> | null = null;

  constructor(
    private readonly cache: RuntimeCache,
    private readonly store: SnapshotStore,
  ) {}

  async begin(chunks: readonly ChunkRef[]): Promise<ChunkSession> {
    await this.refresh();
    const found = new Set(chunks.filter(([h]) => this.locate(h)).map(([h]) => h));
    return {
      get: (hash, bytes) => (found.has(hash) ? this.readAt(hash, bytes) : Promise.resolve(null)),
      rejected: () => undefined,
      end: () => undefined,
    };
  }

  /** Whether a cached capture has the chunk (the index as of the last lookup). */
  async has(hash: string): Promise<boolean> {
    await this.refresh();
    return this.locate(hash) !== undefined;
  }

  /** The chunk's bytes from a cached capture, only when they still match its hash. */
  async read(hash: string): Promise<Buffer | null> {
    await this.refresh();
    const loc = this.locate(hash);
    const data = loc ? await this.readAt(hash, loc.bytes) : null;
    return data && sha256(data) === hash ? data : null;
  }

  /** Per cached capture, the hashes of its chunks in ascending order (for announcing a sample). */
  async sortedHashesByCapture(): Promise<(readonly string[])[]> {
    await this.refresh();
    return [...this.byEntry.values()].map((e) => e.sorted);
  }

  private locate(hash: string): Location | undefined {
    for (const e of this.byEntry.values()) {
      const loc = e.locations.get(hash);
      if (loc) return loc;
    }
    return undefined;
  }

  private async readAt(hash: string, bytes: number): Promise<Buffer | null> {
    const loc = this.locate(hash);
    if (!loc || loc.bytes !== bytes) return null;
    try {
      const fh = await open(join(loc.dir, loc.file), 'r');
      try {
        const buf = Buffer.allocUnsafe(bytes);
        const { bytesRead } = await fh.read(buf, 0, bytes, loc.offset);
        return bytesRead === bytes ? buf : null;
      } finally {
        await fh.close();
      }
    } catch {
      return null;
    }
  }

  /** Brings the index in line with the cache's entries (one refresh at a time). */
  private refresh(): Promise<void> {
    this.refreshing ??= this.reindex().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  private async reindex(): Promise<void> {
    const live = new Set(this.cache.stats().entries.map((e) => e.id));
    for (const id of this.byEntry.keys()) if (!live.has(id)) this.byEntry.delete(id);
    for (const id of this.retryAt.keys()) if (!live.has(id)) this.retryAt.delete(id);
    for (const id of live) {
      if (this.byEntry.has(id) || (this.retryAt.get(id) ?? 0) > Date.now()) continue;
      let unstored = false;
      const index = await this.indexEntry(id).catch((e: unknown) => {
        unstored = e instanceof SnapshotNotFoundError;
        return null;
      });
      if (!index) this.retryAt.set(id, Date.now() + (unstored ? RETRY_UNSTORED_MS : RETRY_INDEX_MS));
      else if (this.cache.has(id)) this.byEntry.set(id, index);
    }
  }

  private async indexEntry(id: string): Promise<EntryIndex> {
    const manifest = await this.store.readManifest(await this.store.getRecord(id));
    const dir = join(this.cache.dir, id);
    const locations = new Map<string, Location>();
    for (const f of manifest.files) {
      let offset = 0;
      for (const [hash, bytes] of f.chunks) {
        if (!locations.has(hash)) locations.set(hash, { dir, file: f.name, offset, bytes });
        offset += bytes;
      }
    }
    return { locations, sorted: [...locations.keys()].sort() };
  }
}
