/**
 * Errors domain code throws for clients to see. Each kind has one HTTP status (and one Connect
 * code, later); `errorBody` turns them into responses in one place. Module errors (snapshot
 * repository, runtime, network, image pulls) extend DomainError and set their kind where they are
 * thrown, so that one mapping covers them all. Anything else thrown is an internal error (500).
 */
export type DomainErrorKind =
  | 'invalid'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'too_large'
  /** This node (or cluster) is at its limit; the client should retry after `retryAfter`. */
  | 'capacity'
  | 'unavailable'
  | 'bad_gateway'
  /** The sandbox runtime failed (a start, checkpoint or restore did not complete). */
  | 'runtime_failure'
  /** An upstream (a node behind the gateway) did not answer in time. */
  | 'timeout'
  /** An E2B feature AgentENV does not have (docs/compatibility.md says which, and why). */
  | 'unsupported'
  | 'internal';

export const STATUS: Readonly<Record<DomainErrorKind, number>> = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  gone: 410,
  too_large: 413,
  capacity: 429,
  unavailable: 503,
  bad_gateway: 502,
  runtime_failure: 500,
  timeout: 504,
  unsupported: 501,
  internal: 500,
};

/** Kinds that say the node itself failed: they are logged, and their messages get context. */
export function isFault(kind: DomainErrorKind): boolean {
  return kind === 'internal' || kind === 'runtime_failure';
}

export interface DomainErrorOptions {
  cause?: unknown;
  /** Fields the error body carries besides `code` and `message` (E2B's `sandboxId`). */
  details?: Readonly<Record<string, string | number>>;
}

/** Seconds a capacity refusal asks the client to wait when the thrower names none. */
const DEFAULT_CAPACITY_RETRY_SECS = 1;

export class DomainError extends Error {
  override name = 'DomainError';
  /** Seconds a client should wait before retrying (429/503); every capacity refusal has one. */
  readonly retryAfter: number | undefined;
  readonly details: Readonly<Record<string, string | number>> | undefined;

  constructor(
    readonly kind: DomainErrorKind,
    message: string,
    retryAfter?: number,
    options: DomainErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.retryAfter = retryAfter ?? (kind === 'capacity' ? DEFAULT_CAPACITY_RETRY_SECS : undefined);
    this.details = options.details;
  }
}

/**
 * The base class of a module's errors: each has a stable `code`, and its kind (and Retry-After,
 * where one applies) follows from the code by the module's tables, so the kind is set where the
 * error is thrown and the one mapping covers the module.
 */
export function codedError<C extends string>(
  kinds: Readonly<Record<C, DomainErrorKind>>,
  retryAfter?: Readonly<Partial<Record<C, number>>>,
) {
  return class CodedError extends DomainError {
    constructor(
      readonly code: C,
      message: string,
      options?: { cause?: unknown },
    ) {
      super(kinds[code], message, retryAfter?.[code], options);
    }
  };
}

export const invalid = (m: string) => new DomainError('invalid', m);
export const notFound = (m: string) => new DomainError('not_found', m);
export const conflict = (m: string) => new DomainError('conflict', m);
/** `what` is an E2B feature AgentENV does not have, for the reason `why`. */
export const unsupported = (what: string, why: string) =>
  new DomainError('unsupported', `${what} is not supported by AgentENV: ${why}`);

/**
 * `err` as a domain error whose message says what was being done. A client-facing refusal
 * (capacity, not found, invalid, …) is returned as it is: its message already says why. A fault
 * (runtime failure, internal) or anything that is not a DomainError gets `context: ` in front,
 * keeping its kind and Retry-After.
 */
export function withContext(err: unknown, context: string): DomainError {
  if (err instanceof DomainError && !isFault(err.kind)) return err;
  const kind = err instanceof DomainError ? err.kind : 'internal';
  const message = err instanceof Error ? err.message : String(err);
  return new DomainError(kind, `${context}: ${message}`, (err as DomainError).retryAfter, { cause: err });
}
