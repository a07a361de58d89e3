import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import {
  DomainError,
  errorBody as domainErrorBody,
  STATUS,
  statusBody,
  type DomainErrorKind,
  type ErrorResponse,
} from '@agentenv/common';
import { OciError, type OciErrorCode } from '../image/index.js';
import { NetworkError } from '../network/index.js';
import { SnapshotError, type SnapshotErrorCode } from '../snapshot/index.js';

/** Image pull failures: the client's reference or image, or the registry's fault. */
const OCI_ERROR_KIND: Record<OciErrorCode, DomainErrorKind> = {
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

/** Snapshot repository and runtime cache failures. */
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

/** The single place errors become HTTP responses: `{code, message}` plus Retry-After. */
export function errorBody(err: unknown): ErrorResponse {
  if (err instanceof DomainError) return domainErrorBody(err);
  if (err instanceof SnapshotError) return statusBody(STATUS[SNAPSHOT_ERROR_KIND[err.code]], err.message);
  if (err instanceof OciError) return statusBody(STATUS[OCI_ERROR_KIND[err.code]], err.message);
  if (err instanceof NetworkError) {
    if (err.code === 'INVALID_CIDR' || err.code === 'DOMAIN_NOT_SUPPORTED')
      return statusBody(400, err.message);
    if (err.code === 'EXHAUSTED') return statusBody(503, err.message, 5);
  }
  const fe = err as FastifyError;
  if (fe.validation) {
    const v = fe.validation[0];
    const field =
      (v?.instancePath || '').replace(/^\//, '').replace(/\//g, '.') ||
      (v?.params as { missingProperty?: string })?.missingProperty ||
      fe.validationContext ||
      'request';
    return statusBody(400, `invalid ${field}: ${v?.message ?? fe.message}`);
  }
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return statusBody(413, 'request body too large');
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500)
    return statusBody(fe.statusCode, fe.message);
  return domainErrorBody(err);
}

export function errorHandler(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const { status, body, retryAfter } = errorBody(err);
  if (status >= 500 && !(err instanceof DomainError && err.kind !== 'internal'))
    req.log.error({ err }, 'request failed');
  if (retryAfter) void reply.header('retry-after', String(retryAfter));
  void reply.status(status).send(body);
}
