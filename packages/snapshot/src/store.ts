import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { readCapture, writeCaptureMeta } from './capture.js';
import type { Capture } from './capture-meta.js';
import { forEachLimit, newSandboxId } from '@agentenv/common';
import {
  EMPTY_SESSION,
  type ChunkFetchObserver,
  type ChunkSession,
  type ChunkSource,
} from './chunk-source.js';
import { Chunker, chunkModeFor, validateChunking, type ChunkingOptions } from './chunker.js';
import {
  SnapshotCorruptError,
  SnapshotError,
  SnapshotInvalidError,
  SnapshotNotFoundError,
} from './errors.js';
import { Leases, type LeaseOptions } from './lease.js';
import {
  encodeManifest,
  MANIFEST_FORMAT,
  manifestChunkHashes,
  parseManifest,
  sha256,
  type ChunkRef,
  type Manifest,
  type ManifestFile,
} from './manifest.js';
import { RECORD_FORMAT, type RecordFilter, type Repository, type SnapshotRecord } from './repository.js';
import { checkSnapshotId, isSnapshotId, validateRecord } from './repository-keys.js';

export interface SnapshotStoreOptions {
  readonly repository: Repository;
  readonly chunking?: Partial<ChunkingOptions>;
  /** Blob transfers in flight at once (default 8). */
  readonly concurrency?: number;
  readonly lease?: LeaseOptions;
  /** A collection leaves unreferenced blobs younger than this (default 15 min). */
  readonly gcGraceMs?: number;
}

export interface StoreCaptureOptions {
  /** The snapshot this capture follows (e.g. the previous pause of the same sandbox): its chunks are known present. */
  readonly parent?: string;
  /** Default: a new random id. */
  readonly id?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly meta?: Readonly<Record<string, unknown>>;
  /** Names to take for the snapshot (AliasTakenError when one is another snapshot's). */
  readonly aliases?: readonly string[];
  /** Stops the store (it then rejects with the signal's reason and commits nothing). */
  readonly signal?: AbortSignal;
}

export interface StoredSnapshot {
  readonly snapshotId: string;
  readonly record: SnapshotRecord;
  readonly manifest: Manifest;
  /** What the repository grew by: bytes of the chunks and manifest this call uploaded. */
  readonly bytesWritten: number;
  /** Bytes of the capture's files. */
  readonly bytesTotal: number;
  readonly chunksTotal: number;
  /** Chunks uploaded (the manifest not counted). */
  readonly chunksWritten: number;
}

export interface GcReport {
  /** Set when the collection did not run to the end: a writer was (or became) active. */
  readonly skipped?: 'writer_active';
  readonly records: number;
  readonly blobsDeleted: number;
  readonly bytesDeleted: number;
  readonly blobsKept: number;
}

const READ_CHUNK = 1024 * 1024;
const MANIFEST_CACHE = 16;
const GC_BATCH = 64;

/** Non-library errors as library ones: `invalid` for a bad capture, `io` for local disk trouble. */
function wrap(e: unknown, what: string, code: 'invalid' | 'io' = 'invalid'): never {
  if (e instanceof SnapshotError || (e as Error).name === 'AbortError') throw e;
  if (code === 'invalid') throw new SnapshotInvalidError(`${what}: ${(e as Error).message}`, { cause: e });
  throw new SnapshotError(code, `${what}: ${(e as Error).message}`, { cause: e });
}

/**
 * Incremental capture storage over a Repository. A capture directory becomes chunks (see
 * chunker.ts for why content-defined) plus a manifest blob plus a record; only chunks the
 * repository lacks are uploaded, so ten pauses of one sandbox cost one full copy plus ten
 * deltas. Materializing is the reverse, every chunk verified against its hash.
 *
 * Deletion is mark-and-sweep: deleting a snapshot removes its record; `gc` then deletes the
 * blobs no record refers to, under the exclusive lease (lease.ts) so that it never races a
 * capture that counted on a blob being there, and only blobs older than a grace period, which
 * also covers a writer whose lease expired while stalled.
 */
export class SnapshotStore {
  readonly repository: Repository;
  readonly chunking: ChunkingOptions;
  private readonly concurrency: number;
  private readonly leases: Leases;
  private readonly gcGraceMs: number;
  private readonly manifests = new Map<string, Manifest>();
  private chunkSources: readonly ChunkSource[] = [];
  private chunkObserver: ChunkFetchObserver | undefined;

  constructor(opts: SnapshotStoreOptions) {
    this.repository = opts.repository;
    this.chunking = validateChunking(opts.chunking);
    this.concurrency = opts.concurrency ?? 8;
    this.leases = new Leases(opts.repository, opts.lease);
    this.gcGraceMs = opts.gcGraceMs ?? 15 * 60_000;
  }

  /**
   * Where materialising looks for chunks before the repository, in order (e.g. this node's
   * runtime cache, then peers). Set once the sources exist, since they may need this store.
   */
  setChunkSources(sources: readonly ChunkSource[], observer?: ChunkFetchObserver): void {
    this.chunkSources = sources;
    this.chunkObserver = observer;
  }

  // ------------------------------------------------------------ storing

  async storeCapture(captureDir: string, opts: StoreCaptureOptions = {}): Promise<StoredSnapshot> {
    const capture = await readCapture(captureDir).catch((e: unknown) => wrap(e, 'capture cannot be stored'));
    const id = checkSnapshotId(opts.id ?? newSandboxId());
    const base: Omit<SnapshotRecord, 'manifest' | 'bytesTotal'> = {
      format: RECORD_FORMAT,
      id,
      createdAt: new Date().toISOString(),
      ...(opts.parent ? { parent: checkSnapshotId(opts.parent) } : {}),
      labels: { ...opts.labels },
      meta: { ...opts.meta },
    };
    validateRecord({ ...base, manifest: '0'.repeat(64), bytesTotal: 0 }, `snapshot ${id}`);
    return this.leases.shared(async () => {
      const up = new Uploader(this.repository, this.concurrency);
      try {
        return await this.upload(capture, base, up, opts);
      } finally {
        // Nothing may still be writing once the lease is released.
        await up.settle();
      }
    });
  }

  private async upload(
    capture: Capture,
    base: Omit<SnapshotRecord, 'manifest' | 'bytesTotal'>,
    up: Uploader,
    opts: StoreCaptureOptions,
  ): Promise<StoredSnapshot> {
    if (opts.parent) {
      // While we hold the lease no collection runs, so the parent's chunks stay put.
      const parent = await this.repository.getRecord(opts.parent);
      const m = parent ? await this.readManifest(parent).catch(() => null) : null;
      if (m) for (const h of manifestChunkHashes(m)) up.known.add(h);
    }
    const files: ManifestFile[] = [];
    for (const f of capture.meta.files) {
      files.push(await this.chunkFile(join(capture.dir, f.name), f.name, f.bytes, up, opts.signal));
    }
    const manifest: Manifest = {
      format: MANIFEST_FORMAT,
      capture: capture.meta,
      chunking: this.chunking,
      files,
    };
    const data = encodeManifest(manifest);
    const manifestHash = sha256(data);
    await up.add(manifestHash, data, false);
    await up.drain();
    const bytesTotal = files.reduce((n, f) => n + f.bytes, 0);
    const record: SnapshotRecord = { ...base, manifest: manifestHash, bytesTotal };
    opts.signal?.throwIfAborted();
    await this.repository.commit(record, opts.aliases ?? []);
    this.remember(manifestHash, manifest);
    return {
      snapshotId: record.id,
      record,
      manifest,
      bytesWritten: up.bytesWritten,
      bytesTotal,
      chunksTotal: files.reduce((n, f) => n + f.chunks.length, 0),
      chunksWritten: up.chunksWritten,
    };
  }

  private async chunkFile(
    path: string,
    name: string,
    bytes: number,
    up: Uploader,
    signal: AbortSignal | undefined,
  ): Promise<ManifestFile> {
    const mode = chunkModeFor(bytes, this.chunking);
    const chunker = new Chunker(this.chunking, mode);
    const chunks: ChunkRef[] = [];
    const take = (c: Buffer) => {
      const h = sha256(c);
      chunks.push([h, c.length]);
      return up.add(h, c);
    };
    try {
      for await (const data of createReadStream(path, { highWaterMark: READ_CHUNK })) {
        signal?.throwIfAborted();
        for (const c of chunker.push(data as Buffer)) await take(c);
      }
      for (const c of chunker.end()) await take(c);
    } catch (e) {
      wrap(e, `reading capture file ${name}`);
    }
    const sum = chunks.reduce((n, [, b]) => n + b, 0);
    if (sum !== bytes)
      throw new SnapshotInvalidError(
        `capture file ${name} changed while stored (${sum} bytes, expected ${bytes})`,
      );
    return { name, bytes, mode, chunks };
  }

  // ------------------------------------------------------------ reading

  /** A record by id, else by name; null when neither exists. */
  async resolve(idOrName: string): Promise<SnapshotRecord | null> {
    if (isSnapshotId(idOrName)) {
      const r = await this.repository.getRecord(idOrName);
      if (r) return r;
    }
    if (idOrName.length === 0) return null;
    const id = await this.repository.resolveAlias(idOrName).catch((e: unknown) => {
      if (e instanceof SnapshotInvalidError) return null;
      throw e;
    });
    return id ? this.repository.getRecord(id) : null;
  }

  /** Every record matching `filter`, newest first, read page by page. */
  async listAll(filter: RecordFilter): Promise<SnapshotRecord[]> {
    const out: SnapshotRecord[] = [];
    let nextToken: string | undefined;
    do {
      const page = await this.repository.listRecords(filter, {
        limit: 1000,
        ...(nextToken ? { nextToken } : {}),
      });
      out.push(...page.records);
      nextToken = page.nextToken;
    } while (nextToken);
    return out;
  }

  async getRecord(idOrName: string): Promise<SnapshotRecord> {
    const r = await this.resolve(idOrName);
    if (!r) throw new SnapshotNotFoundError(idOrName);
    return r;
  }

  async readManifest(record: SnapshotRecord): Promise<Manifest> {
    const cached = this.manifests.get(record.manifest);
    if (cached) return cached;
    const m = parseManifest(await this.repository.readBlob(record.manifest), `of snapshot ${record.id}`);
    this.remember(record.manifest, m);
    return m;
  }

  private remember(hash: string, m: Manifest): void {
    this.manifests.delete(hash);
    this.manifests.set(hash, m);
    if (this.manifests.size > MANIFEST_CACHE) {
      const oldest = this.manifests.keys().next().value;
      if (oldest !== undefined) this.manifests.delete(oldest);
    }
  }

  /**
   * Rebuilds the capture directory `destDir` (which must not exist) from the repository. It is
   * assembled beside it and renamed into place once every chunk matched its hash, the files were
   * fsynced and capture.json checks out, so `destDir` is complete or absent.
   */
  async materialize(idOrName: string, destDir: string): Promise<Capture> {
    const record = await this.getRecord(idOrName);
    const exists = await stat(destDir).then(
      () => true,
      () => false,
    );
    if (exists) throw new SnapshotInvalidError(`cannot materialize into ${destDir}: it exists`);
    const partial = `${destDir}.partial-${randomBytes(4).toString('hex')}`;
    const handles: FileHandle[] = [];
    let sessions: { name: string; session: ChunkSession }[] = [];
    try {
      const manifest = await this.readManifest(record);
      await mkdir(partial, { recursive: true });
      // Each distinct chunk is fetched once and written wherever it occurs.
      const uses = new Map<string, { fh: FileHandle; offset: number; bytes: number }[]>();
      for (const f of manifest.files) {
        const fh = await open(join(partial, f.name), 'w', 0o600);
        handles.push(fh);
        await fh.truncate(f.bytes);
        let offset = 0;
        for (const [h, bytes] of f.chunks) {
          const list = uses.get(h) ?? [];
          list.push({ fh, offset, bytes });
          uses.set(h, list);
          offset += bytes;
        }
      }
      const needed = [...uses].map(([hash, list]) => [hash, list[0]!.bytes] as const);
      sessions = await this.beginSessions(needed);
      await forEachLimit([...uses], this.concurrency, async ([hash, list]) => {
        const data = await this.fetchChunk(hash, list[0]!.bytes, sessions);
        for (const u of list) {
          if (data.length !== u.bytes) {
            throw new SnapshotCorruptError(
              `chunk ${hash} has ${data.length} bytes; the manifest says ${u.bytes}`,
            );
          }
          await u.fh.write(data, 0, data.length, u.offset);
        }
      });
      await Promise.all(handles.map((fh) => fh.sync()));
      await Promise.all(handles.splice(0).map((fh) => fh.close()));
      await writeCaptureMeta(partial, manifest.capture);
      const capture = await readCapture(partial).catch((e: unknown) => {
        throw new SnapshotCorruptError(`snapshot ${record.id} rebuilt badly: ${(e as Error).message}`);
      });
      await rename(partial, destDir);
      return { dir: destDir, meta: capture.meta };
    } catch (e) {
      await Promise.all(handles.map((fh) => fh.close().catch(() => undefined)));
      await rm(partial, { recursive: true, force: true }).catch(() => undefined);
      // A blob vanishing under us most likely means the snapshot was deleted meanwhile.
      if (
        e instanceof SnapshotCorruptError &&
        !(await this.repository.getRecord(record.id).catch(() => record))
      ) {
        throw new SnapshotNotFoundError(record.id);
      }
      return wrap(e, `materializing snapshot ${record.id}`, 'io');
    } finally {
      for (const s of sessions) s.session.end();
    }
  }

  private async beginSessions(
    chunks: readonly ChunkRef[],
  ): Promise<{ name: string; session: ChunkSession }[]> {
    return Promise.all(
      this.chunkSources.map(async (src) => ({
        name: src.name,
        session: await src.begin(chunks).catch(() => EMPTY_SESSION),
      })),
    );
  }

  /** From the first source whose bytes match the hash, else from the repository. */
  private async fetchChunk(
    hash: string,
    bytes: number,
    sessions: readonly { name: string; session: ChunkSession }[],
  ): Promise<Buffer> {
    for (const { name, session } of sessions) {
      const data = await session.get(hash, bytes).catch(() => null);
      if (!data) continue;
      if (data.length === bytes && sha256(data) === hash) {
        this.chunkObserver?.fetched(name, bytes);
        return data;
      }
      session.rejected(hash);
      this.chunkObserver?.rejected(name);
    }
    const data = await this.repository.readBlob(hash);
    this.chunkObserver?.fetched('repository', data.length);
    return data;
  }

  // ------------------------------------------------------------ deleting

  /** Removes the snapshot (record and names); `collect` (default) then runs a collection. */
  async deleteSnapshot(idOrName: string, opts: { collect?: boolean } = {}): Promise<boolean> {
    const r = await this.resolve(idOrName);
    if (!r) return false;
    const deleted = await this.repository.deleteRecord(r.id);
    if (deleted && (opts.collect ?? true)) await this.gc();
    return deleted;
  }

  /** Deletes blobs no record refers to (older than the grace period). See the class comment. */
  async gc(opts: { graceMs?: number } = {}): Promise<GcReport> {
    const grace = opts.graceMs ?? this.gcGraceMs;
    let report: GcReport = { records: 0, blobsDeleted: 0, bytesDeleted: 0, blobsKept: 0 };
    const stop = (records: number, blobsDeleted: number, bytesDeleted: number, blobsKept: number) => {
      report = { skipped: 'writer_active', records, blobsDeleted, bytesDeleted, blobsKept };
    };
    const ran = await this.leases.exclusive(async (alone) => {
      const live = new Set<string>();
      let records = 0;
      let token: string | undefined;
      do {
        const page = await this.repository.listRecords({}, { limit: 1000, nextToken: token });
        for (const r of page.records) {
          records++;
          live.add(r.manifest);
          try {
            for (const h of manifestChunkHashes(await this.readManifest(r))) live.add(h);
          } catch (e) {
            // A record whose manifest is unreadable cannot be restored anyway; anything else
            // (the repository failing) must stop the collection.
            if (!(e instanceof SnapshotCorruptError)) throw e;
          }
        }
        token = page.nextToken;
        // A writer waiting for us should not wait for a whole listing of a large repository.
        if (!(await alone())) return stop(records, 0, 0, 0);
      } while (token);
      const cutoff = Date.now() - grace;
      const doomed: { hash: string; bytes: number }[] = [];
      let kept = 0;
      for await (const b of this.repository.listBlobs()) {
        if (!live.has(b.hash) && b.mtimeMs <= cutoff) doomed.push(b);
        else kept++;
        if ((doomed.length + kept) % 5000 === 0 && !(await alone())) return stop(records, 0, 0, kept);
      }
      let deleted = 0;
      let bytes = 0;
      for (let i = 0; i < doomed.length; i += GC_BATCH) {
        if (!(await alone())) return stop(records, deleted, bytes, kept);
        const batch = doomed.slice(i, i + GC_BATCH);
        await forEachLimit(batch, this.concurrency, (b) => this.repository.deleteBlob(b.hash));
        deleted += batch.length;
        bytes += batch.reduce((n, b) => n + b.bytes, 0);
      }
      report = { records, blobsDeleted: deleted, bytesDeleted: bytes, blobsKept: kept };
    });
    return ran === null ? { ...report, skipped: 'writer_active' } : report;
  }
}

/**
 * Uploads chunks in the background, at most `limit` at once, each distinct hash once, skipping
 * those the repository has. `add` waits while the queue is full, so reading pauses instead of
 * buffering the capture in memory.
 */
class Uploader {
  readonly known = new Set<string>();
  private readonly queued = new Set<string>();
  private readonly inFlight = new Set<Promise<void>>();
  private error: unknown = null;
  bytesWritten = 0;
  chunksWritten = 0;

  constructor(
    private readonly repo: Repository,
    private readonly limit: number,
  ) {}

  /** `isChunk` false: the manifest (its bytes count as written, it is not a chunk). */
  async add(hash: string, data: Buffer, isChunk = true): Promise<void> {
    if (this.error) throw this.error;
    if (this.known.has(hash) || this.queued.has(hash)) return;
    this.queued.add(hash);
    const p: Promise<void> = this.upload(hash, data, isChunk).then(
      () => {
        this.inFlight.delete(p);
      },
      (e: unknown) => {
        this.inFlight.delete(p);
        this.error ??= e;
      },
    );
    this.inFlight.add(p);
    while (this.inFlight.size >= this.limit) await Promise.race(this.inFlight);
    if (this.error) throw this.error;
  }

  private async upload(hash: string, data: Buffer, isChunk: boolean): Promise<void> {
    if (await this.repo.hasBlob(hash)) return;
    await this.repo.putBlob(hash, data);
    this.bytesWritten += data.length;
    if (isChunk) this.chunksWritten++;
  }

  async drain(): Promise<void> {
    await Promise.all(this.inFlight);
    if (this.error) throw this.error;
  }

  /** Waits for every upload, failed or not. */
  async settle(): Promise<void> {
    await Promise.all(this.inFlight);
  }
}
