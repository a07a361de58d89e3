import { codedError, DomainError, type DomainErrorKind } from '@agentenv/common';

export type SnapshotErrorCode =
  /** Bad repository settings (e.g. no region): a startup error. */
  | 'config'
  /** The repository cannot be used now (unreachable, credentials refused, I/O error): the capture failed. */
  | 'unavailable'
  | 'not_found'
  /** A name already belongs to another snapshot. */
  | 'alias_taken'
  /** A record with this id already exists. */
  | 'exists'
  /** A blob or manifest is missing or does not match its hash. */
  | 'corrupt'
  /** The runtime cache cannot make room: everything in it is in use. */
  | 'cache_full'
  | 'invalid'
  /** A node-local filesystem operation failed (runtime cache, workspace). */
  | 'io'
  /** The repository is held by a garbage collection longer than a writer waits. */
  | 'busy';

/** What each code is for a client (the API maps kinds to statuses in one place). */
export const SNAPSHOT_ERROR_KIND: Readonly<Record<SnapshotErrorCode, DomainErrorKind>> = {
  config: 'internal',
  unavailable: 'unavailable',
  not_found: 'not_found',
  alias_taken: 'conflict',
  exists: 'conflict',
  corrupt: 'internal',
  cache_full: 'unavailable',
  invalid: 'invalid',
  io: 'internal',
  busy: 'unavailable',
};

/** Base of every error of the snapshot library; `code` is stable, the kind follows from it. */
export class SnapshotError extends codedError(SNAPSHOT_ERROR_KIND) {
  override readonly name: string = 'SnapshotError';
}

export class RepositoryConfigError extends SnapshotError {
  override readonly name = 'RepositoryConfigError';
  constructor(message: string) {
    super('config', message);
  }
}

export type UnavailableReason = 'unreachable' | 'credentials' | 'bucket' | 'io';

/**
 * The repository did not answer, refused the credentials, has no such bucket, or a filesystem
 * call failed. Nothing was committed; a sandbox being captured keeps running.
 */
export class RepositoryUnavailableError extends SnapshotError {
  override readonly name = 'RepositoryUnavailableError';
  constructor(
    readonly reason: UnavailableReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('unavailable', message, options);
  }
}

export class SnapshotNotFoundError extends SnapshotError {
  override readonly name = 'SnapshotNotFoundError';
  constructor(readonly idOrName: string) {
    super('not_found', `snapshot ${idOrName} not found`);
  }
}

export class AliasTakenError extends SnapshotError {
  override readonly name = 'AliasTakenError';
  constructor(
    readonly alias: string,
    readonly heldBy: string,
  ) {
    super('alias_taken', `the name ${JSON.stringify(alias)} already belongs to snapshot ${heldBy}`);
  }
}

export class SnapshotCorruptError extends SnapshotError {
  override readonly name = 'SnapshotCorruptError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('corrupt', message, options);
  }
}

export class CacheFullError extends SnapshotError {
  override readonly name = 'CacheFullError';
  constructor(message: string) {
    super('cache_full', message);
  }
}

export class SnapshotInvalidError extends SnapshotError {
  override readonly name = 'SnapshotInvalidError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('invalid', message, options);
  }
}

/**
 * A capture directory is missing, incomplete, corrupt or from another runtime build. It is the
 * capture format's error, thrown by its readers and by a driver refusing a restore, so it is no
 * SnapshotError: the store turns it into an invalid request when it is asked to store one.
 */
export class CaptureInvalidError extends DomainError {
  override readonly name = 'CaptureInvalidError';
  readonly code = 'capture_invalid';
  constructor(
    message: string,
    /** Runtime output (stderr, logs) that explains the failure, for operators. */
    readonly detail?: string,
  ) {
    super('runtime_failure', message);
  }
}
