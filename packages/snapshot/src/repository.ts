import type { Readable } from 'node:stream';

/**
 * The snapshot repository: durable, possibly shared by several nodes. It holds content-addressed
 * blobs (capture chunks, manifests), catalogue records (one JSON object per snapshot) and aliases
 * (one object per name → snapshot id), plus short-lived lock objects used by garbage collection.
 *
 * Why this shape: nothing is a shared mutable index. Every write creates or replaces one object,
 * so two nodes committing at once never rewrite the same file; a name is taken by an exclusive
 * create; a record only appears once everything it refers to exists (blobs first, record last,
 * the record written in one atomic step). A crash at any point therefore leaves either the old
 * catalogue or the new one; at worst unreferenced blobs (collected by SnapshotStore.gc) or an
 * alias claimed for a record that never appeared (ignored, and taken over once stale).
 *
 * Layout (relative to the posix directory or the S3 prefix):
 *   blobs/sha256/<2 hex>/<64 hex>   chunk or manifest, named by the sha256 of its content
 *   records/<id>.json               SnapshotRecord
 *   aliases/<urlencoded name>       {"id","nonce","createdAt"}
 *   locks/<kind>-<random>.json      LockBody (see lease.ts)
 */
/** The format a record names: its shape is checked by `validateRecord` (repository-keys.ts). */
export const RECORD_FORMAT = 'aenv-snapshot/1';

export interface SnapshotRecord {
  readonly format: typeof RECORD_FORMAT;
  readonly id: string;
  readonly createdAt: string;
  /** The snapshot this one was captured after (informational; chunks are not shared by reference). */
  readonly parent?: string;
  /** Exact-match filters for listRecords (e.g. sandboxId, templateId, kind). */
  readonly labels: Readonly<Record<string, string>>;
  /** Opaque to the library: what the orchestrator needs to describe and restore the snapshot. */
  readonly meta: Readonly<Record<string, unknown>>;
  /** sha256 of the manifest blob. */
  readonly manifest: string;
  /** Sum of the capture's file sizes. */
  readonly bytesTotal: number;
}

export interface RecordFilter {
  readonly labels?: Readonly<Record<string, string>>;
  readonly parent?: string;
  /** Only the record this name points to. */
  readonly alias?: string;
}

export interface PageRequest {
  /** 1–1000, default 100. */
  readonly limit?: number;
  readonly nextToken?: string;
}

export interface RecordPage {
  /** Newest first (createdAt, then id, descending). */
  readonly records: SnapshotRecord[];
  readonly nextToken?: string;
}

export interface AliasEntry {
  readonly name: string;
  readonly id: string;
}

export interface BlobInfo {
  readonly hash: string;
  readonly bytes: number;
  readonly mtimeMs: number;
}

/** Bytes, a stream (buffered: meant for chunk-sized blobs), or a file read as it is. */
export type BlobSource = Buffer | Readable | { readonly path: string };

export interface LockBody {
  readonly kind: 'shared' | 'exclusive';
  readonly owner: string;
  /** Milliseconds since the epoch; a lock past it is stale (its holder died). */
  readonly expiresAt: number;
}

export interface Repository {
  readonly backend: 'posix_fs' | 'oss';
  /** For messages and logs, e.g. `/var/lib/aenv/snapshot-store` or `s3://bucket/prefix`. */
  readonly location: string;
  /** Creates the layout if needed and checks access; throws RepositoryUnavailableError. */
  open(): Promise<void>;
  close(): Promise<void>;

  hasBlob(hash: string): Promise<boolean>;
  /** Stores a blob under its sha256 (checked: a mismatch throws and stores nothing). */
  putBlob(hash: string, source: BlobSource): Promise<{ bytes: number }>;
  /** A missing blob throws SnapshotCorruptError. */
  getBlob(hash: string): Promise<Readable>;
  /** The whole blob, its hash checked. */
  readBlob(hash: string): Promise<Buffer>;
  deleteBlob(hash: string): Promise<void>;
  listBlobs(): AsyncIterable<BlobInfo>;

  getRecord(id: string): Promise<SnapshotRecord | null>;
  listRecords(filter?: RecordFilter, page?: PageRequest): Promise<RecordPage>;
  /**
   * Publishes a record whose blobs the caller has stored, and takes the given names for it
   * (AliasTakenError when one belongs to another snapshot; then nothing is published).
   */
  commit(record: SnapshotRecord, aliases?: readonly string[]): Promise<void>;
  /** Removes the record and the names pointing to it; its blobs stay until a collection. */
  deleteRecord(id: string): Promise<boolean>;

  /** The snapshot id a name points to, if that snapshot exists. */
  resolveAlias(name: string): Promise<string | null>;
  /** Points a name at an existing snapshot, replacing what it pointed to. */
  setAlias(name: string, id: string): Promise<void>;
  deleteAlias(name: string): Promise<boolean>;
  /** Names whose snapshot exists; only those of `id` when given. */
  listAliases(id?: string): Promise<AliasEntry[]>;

  putLock(name: string, body: LockBody): Promise<void>;
  listLocks(): Promise<{ name: string; body: LockBody }[]>;
  deleteLock(name: string): Promise<void>;

  /**
   * Takes the claim `name` for `owner` with an exclusive create, unless someone holds it
   * already; returns the holder (=== owner when the claim is ours, also when we took it before).
   * Claims decide which node owns a paused sandbox when several could resume it.
   */
  claim(name: string, owner: string): Promise<string>;
  /** Missing is fine. */
  deleteClaim(name: string): Promise<void>;
}

export interface ObjectStat {
  readonly key: string;
  readonly bytes: number;
  readonly mtimeMs: number;
}
