import { DomainError, STATUS } from './errors.js';

/** What a client receives for an error: the status, `{code, message}`, and Retry-After seconds. */
export interface ErrorResponse {
  status: number;
  body: { code: number; message: string };
  retryAfter?: number;
}

/** The HTTP form of an error with a status; anything that is not a DomainError is a 500. */
export function errorBody(err: unknown): ErrorResponse {
  if (!(err instanceof DomainError)) return statusBody(500, 'internal error');
  return statusBody(STATUS[err.kind], err.message, err.retryAfter);
}

/** `{code, message}` with the status as its code, as every error body has. */
export function statusBody(status: number, message: string, retryAfter?: number): ErrorResponse {
  return { status, body: { code: status, message }, ...(retryAfter ? { retryAfter } : {}) };
}
