import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, STATUS, type ApiErrorKind } from '../errors.js';
import { OciError, type OciErrorCode } from '../image/oci/errors.js';
import { NetworkError } from '../network/errors.js';
import { SNAPSHOT_ERROR_KIND, SnapshotError } from '../snapshot/errors.js';

/** Image pull failures: the client's reference or image, or the registry's fault. */
const OCI_ERROR_KIND: Record<OciErrorCode, ApiErrorKind> = {
  bad_reference: 'invalid',
  not_found: 'not_found',
  unauthorized: 'invalid',
  unsupported: 'invalid',
  platform_mismatch: 'invalid',
  unsafe_layer: 'invalid',
  registry_unavailable: 'bad_gateway',
  registry_error: 'bad_gateway',
  digest_mismatch: 'bad_gateway',
  disk_full: 'unavailable',
  cache_full: 'unavailable',
};

/** The single place errors become HTTP responses: `{code, message}` plus Retry-After. */
export function errorBody(err: unknown): {
  status: number;
  body: { code: number; message: string };
  retryAfter?: number;
} {
  if (err instanceof ApiError) {
    const status = STATUS[err.kind];
    return {
      status,
      body: { code: status, message: err.message },
      ...(err.retryAfter ? { retryAfter: err.retryAfter } : {}),
    };
  }
  if (err instanceof SnapshotError) {
    const status = STATUS[SNAPSHOT_ERROR_KIND[err.code]];
    return { status, body: { code: status, message: err.message } };
  }
  if (err instanceof OciError) {
    const status = STATUS[OCI_ERROR_KIND[err.code]];
    return { status, body: { code: status, message: err.message } };
  }
  if (err instanceof NetworkError) {
    const client = err.code === 'INVALID_CIDR' || err.code === 'DOMAIN_NOT_SUPPORTED';
    if (client) return { status: 400, body: { code: 400, message: err.message } };
    if (err.code === 'EXHAUSTED')
      return { status: 503, body: { code: 503, message: err.message }, retryAfter: 5 };
  }
  const fe = err as FastifyError;
  if (fe.validation) {
    const v = fe.validation[0];
    const field =
      (v?.instancePath || '').replace(/^\//, '').replace(/\//g, '.') ||
      (v?.params as { missingProperty?: string })?.missingProperty ||
      fe.validationContext ||
      'request';
    return { status: 400, body: { code: 400, message: `invalid ${field}: ${v?.message ?? fe.message}` } };
  }
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return { status: 413, body: { code: 413, message: 'request body too large' } };
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    return { status: fe.statusCode, body: { code: fe.statusCode, message: fe.message } };
  }
  return { status: 500, body: { code: 500, message: 'internal error' } };
}

export function errorHandler(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const { status, body, retryAfter } = errorBody(err);
  if (status >= 500 && !(err instanceof ApiError && err.kind !== 'internal'))
    req.log.error({ err }, 'request failed');
  if (status === 500 && err instanceof ApiError) body.message = err.message;
  if (retryAfter) void reply.header('retry-after', String(retryAfter));
  void reply.status(status).send(body);
}
