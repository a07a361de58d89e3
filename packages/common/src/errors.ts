/**
 * Errors domain code throws for clients to see. Each kind has one HTTP status (and one Connect
 * code, later); `errorBody` turns them into responses in one place. Anything else thrown is an
 * internal error (500).
 */
export type DomainErrorKind =
  | 'invalid'
  | 'unauthorized'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'too_large'
  /** This node (or cluster) is at its limit; the client should retry after `retryAfter`. */
  | 'capacity'
  | 'unavailable'
  | 'bad_gateway'
  /** An upstream (a node behind the gateway) did not answer in time. */
  | 'timeout'
  | 'internal';

export const STATUS: Readonly<Record<DomainErrorKind, number>> = {
  invalid: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  gone: 410,
  too_large: 413,
  capacity: 429,
  unavailable: 503,
  bad_gateway: 502,
  timeout: 504,
  internal: 500,
};

export class DomainError extends Error {
  override name = 'DomainError';
  constructor(
    readonly kind: DomainErrorKind,
    message: string,
    /** Seconds a client should wait before retrying (429/503). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

export const invalid = (m: string) => new DomainError('invalid', m);
export const notFound = (m: string) => new DomainError('not_found', m);
export const conflict = (m: string) => new DomainError('conflict', m);
