import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import {
  DomainError,
  errorBody as domainErrorBody,
  isFault,
  statusBody,
  type ErrorResponse,
} from '@agentenv/common';

/**
 * The single place errors become HTTP responses. Domain code, and every module (snapshot
 * repository, runtime, network, image pulls), throws DomainErrors whose kind decides the status
 * (@agentenv/common); what Fastify itself refuses (validation, body size) is turned into the same
 * kinds here first.
 */
export function errorBody(err: unknown): ErrorResponse {
  if (err instanceof DomainError) return domainErrorBody(err);
  const fe = err as FastifyError;
  const refused = fromFastify(fe);
  if (refused) return domainErrorBody(refused);
  // Fastify's other client errors (bad JSON, an unsupported media type) keep their status.
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500)
    return statusBody(fe.statusCode, fe.message);
  return domainErrorBody(err);
}

/** A request Fastify refused before a handler ran, as the domain error it is. */
function fromFastify(fe: FastifyError): DomainError | undefined {
  if (fe.validation) {
    const v = fe.validation[0];
    const field =
      (v?.instancePath || '').replace(/^\//, '').replace(/\//g, '.') ||
      (v?.params as { missingProperty?: string })?.missingProperty ||
      fe.validationContext ||
      'request';
    return new DomainError('invalid', `invalid ${field}: ${v?.message ?? fe.message}`);
  }
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new DomainError('too_large', 'request body too large');
  return undefined;
}

export function errorHandler(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const { status, body, retryAfter } = errorBody(err);
  if (status >= 500 && !(err instanceof DomainError && !isFault(err.kind))) {
    const detail = operatorDetail(err);
    req.log.error({ err, ...(detail ? { detail } : {}) }, 'request failed');
  }
  if (retryAfter) void reply.header('retry-after', String(retryAfter));
  void reply.status(status).send(body);
}

/**
 * The runtime output that explains a fault (a sandbox's console when it did not start), from the
 * error or one it wraps: the log's error serializer drops the fields of a wrapped error.
 */
export function operatorDetail(err: unknown): string | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const detail = (e as { detail?: unknown }).detail;
    if (typeof detail === 'string' && detail) return detail;
  }
  return undefined;
}
