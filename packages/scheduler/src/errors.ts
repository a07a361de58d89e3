/**
 * Errors the scheduler's domain code throws. The kinds are those of the shared domain errors
 * (HTTP status in the gateway, Connect code here); `rpc/errors.ts` translates them in one place.
 */
export type SchedulerErrorKind =
  | 'invalid'
  | 'unauthorized'
  | 'not_found'
  | 'conflict'
  /** No node has room now; retry after `retryAfter` seconds (the gateway answers 429). */
  | 'capacity'
  /** No healthy node at all (the gateway answers 503). */
  | 'unavailable'
  | 'internal';

export class SchedulerError extends Error {
  override name = 'SchedulerError';
  constructor(
    readonly kind: SchedulerErrorKind,
    message: string,
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

export const invalid = (m: string) => new SchedulerError('invalid', m);
export const notFound = (m: string) => new SchedulerError('not_found', m);
