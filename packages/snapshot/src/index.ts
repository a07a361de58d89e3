import { RepositoryConfigError } from './errors.js';
import { S3Repository, type S3RepositoryOptions } from './s3-repository.js';
import { PosixRepository, type PosixRepositoryOptions } from './posix-repository.js';
import type { Repository } from './repository.js';

export type RepositoryConfig =
  | ({ readonly backend: 'posix_fs' } & PosixRepositoryOptions)
  | ({ readonly backend: 'oss' } & S3RepositoryOptions);

/** The repository named by `snapshot.repository_backend`; options are checked here (config errors throw). */
export function createRepository(config: RepositoryConfig): Repository {
  switch (config.backend) {
    case 'posix_fs':
      return new PosixRepository(config);
    case 'oss':
      return new S3Repository(config);
    default:
      throw new RepositoryConfigError(
        `snapshot.repository_backend must be "posix_fs" or "oss", not ${JSON.stringify((config as { backend: unknown }).backend)}`,
      );
  }
}

export * from './errors.js';
export { DEFAULT_CHUNKING, type ChunkingOptions } from './chunker.js';
export type { Manifest, ManifestFile, ChunkRef } from './manifest.js';
export type {
  Repository,
  SnapshotRecord,
  RecordFilter,
  PageRequest,
  RecordPage,
  AliasEntry,
  BlobInfo,
  BlobSource,
} from './repository.js';
export type { ObjectStat } from './repository.js';
export { ObjectRepository } from './repository-objects.js';
export { PosixRepository, type PosixRepositoryOptions } from './posix-repository.js';
export { S3Repository, checkS3Options, type S3RepositoryOptions } from './s3-repository.js';
export {
  SnapshotStore,
  type SnapshotStoreOptions,
  type StoreCaptureOptions,
  type StoredSnapshot,
  type GcReport,
} from './store.js';
export { RuntimeCache, type RuntimeCacheOptions, type CacheStats } from './cache.js';
export { Workspace } from './workspace.js';
export type { LeaseOptions } from './lease.js';
export type { ChunkSource, ChunkSession, ChunkFetchObserver } from './chunk-source.js';
export { EMPTY_SESSION } from './chunk-source.js';
export { CachedChunks } from './cached-chunks.js';
export type {
  Capture,
  CaptureMeta,
  InitProcess,
  ReadOnlyMount,
  Resources,
  SandboxVolume,
} from './capture-meta.js';
export {
  readCapture,
  parseCaptureMeta,
  listCaptureFiles,
  writeCaptureMeta,
  CAPTURE_META_FILE,
  CAPTURE_FORMAT,
} from './capture.js';
