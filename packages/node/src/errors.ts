/**
 * Errors the node reports to clients. Each kind has one HTTP status; the API maps them in one
 * place (api/errors.ts). Anything else thrown is an internal error (500).
 */
export type ApiErrorKind =
  | 'invalid'
  | 'unauthorized'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'too_large'
  | 'rate_limited'
  | 'unavailable'
  | 'bad_gateway'
  | 'internal';

export const STATUS: Record<ApiErrorKind, number> = {
  invalid: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  gone: 410,
  too_large: 413,
  rate_limited: 429,
  unavailable: 503,
  bad_gateway: 502,
  internal: 500,
};

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly kind: ApiErrorKind,
    message: string,
    /** Seconds a client should wait before retrying (429/503). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

export const invalid = (m: string) => new ApiError('invalid', m);
export const notFound = (m: string) => new ApiError('not_found', m);
export const conflict = (m: string) => new ApiError('conflict', m);
