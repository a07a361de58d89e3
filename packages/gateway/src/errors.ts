import { ApiError, STATUS as NODE_STATUS } from '@agentenv/node/errors';

/**
 * What the gateway itself refuses or fails with. Each kind has one HTTP status, mapped in one
 * place (errorBody); answers that come from a node pass through unchanged.
 */
export type GatewayErrorKind =
  | 'invalid'
  | 'unauthorized'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'rate_limited'
  | 'unavailable'
  | 'bad_gateway'
  | 'timeout'
  | 'internal';

export const STATUS: Record<GatewayErrorKind, number> = {
  invalid: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  gone: 410,
  rate_limited: 429,
  unavailable: 503,
  bad_gateway: 502,
  timeout: 504,
  internal: 500,
};

export class GatewayError extends Error {
  override name = 'GatewayError';
  constructor(
    readonly kind: GatewayErrorKind,
    message: string,
    /** Seconds a client should wait before retrying (429/503). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

export interface ErrorAnswer {
  status: number;
  body: { code: number; message: string };
  retryAfter?: number;
}

/** The single place the gateway's errors become `{code, message}` answers (+ Retry-After). */
export function errorBody(err: unknown): ErrorAnswer {
  if (err instanceof GatewayError) {
    const status = STATUS[err.kind];
    return {
      status,
      body: { code: status, message: err.message },
      ...(err.retryAfter ? { retryAfter: err.retryAfter } : {}),
    };
  }
  // The API-key check is the node's own, so its refusal is the node's error type.
  if (err instanceof ApiError) {
    const status = NODE_STATUS[err.kind];
    return { status, body: { code: status, message: err.message } };
  }
  return { status: 500, body: { code: 500, message: 'internal error' } };
}
