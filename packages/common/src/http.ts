import { DomainError, STATUS } from './errors.js';

/** An error body: `{code, message}` (the status as its code), plus the error's details. */
export type ErrorBody = { code: number; message: string } & Record<string, string | number>;

/** What a client receives for an error: the status, the body, and Retry-After seconds. */
export interface ErrorResponse {
  status: number;
  body: ErrorBody;
  retryAfter?: number;
}

/**
 * The HTTP form of any error: a DomainError (module errors are DomainErrors) by its kind,
 * anything else as a 500 that does not leak its message.
 */
export function errorBody(err: unknown): ErrorResponse {
  if (!(err instanceof DomainError)) return statusBody(500, 'internal error');
  return statusBody(STATUS[err.kind], err.message, err.retryAfter, err.details);
}

/** `{code, message}` with the status as its code, as every error body has. */
export function statusBody(
  status: number,
  message: string,
  retryAfter?: number,
  details?: Readonly<Record<string, string | number>>,
): ErrorResponse {
  return {
    status,
    body: { ...details, code: status, message },
    ...(retryAfter ? { retryAfter } : {}),
  };
}

/** The response headers an error needs besides its body (Retry-After). */
export function errorHeaders(r: ErrorResponse): Record<string, string> {
  return r.retryAfter ? { 'retry-after': String(r.retryAfter) } : {};
}
