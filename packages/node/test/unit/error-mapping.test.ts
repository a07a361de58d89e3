import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { DomainError, STATUS, withContext, type DomainErrorKind } from '@agentenv/common';
import { ImageBuildError, OCI_ERROR_KIND, OciError, type OciErrorCode } from '@agentenv/oci';
import { errorBody, operatorDetail } from '../../src/api/errors.js';
import { NETWORK_ERROR_KIND, NetworkError, type NetworkErrorCode } from '../../src/network/index.js';
import { SandboxRecordError } from '../../src/orchestrator/record.js';
import { sandboxNotFound } from '../../src/proxy/answers.js';
import { RUNTIME_ERROR_KIND, RuntimeError, type RuntimeErrorCode } from '../../src/runtime/index.js';
import {
  CaptureInvalidError,
  SNAPSHOT_ERROR_KIND,
  SnapshotError,
  type SnapshotErrorCode,
} from '@agentenv/snapshot';

/** What a client sees for each kind: written out here, apart from the table it checks. */
const KIND_STATUS: Record<DomainErrorKind, number> = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  gone: 410,
  too_large: 413,
  capacity: 429,
  bad_gateway: 502,
  unavailable: 503,
  runtime_failure: 500,
  timeout: 504,
  unsupported: 501,
  internal: 500,
};

const SNAPSHOT: Record<SnapshotErrorCode, number> = {
  config: 500,
  unavailable: 503,
  not_found: 404,
  alias_taken: 409,
  exists: 409,
  corrupt: 500,
  cache_full: 503,
  invalid: 400,
  io: 500,
  busy: 503,
};

const RUNTIME: Record<RuntimeErrorCode, number> = {
  unavailable: 503,
  not_found: 500,
  invalid_request: 400,
  start_failed: 500,
  not_ready: 500,
  checkpoint_failed: 500,
  restore_failed: 500,
  operation_failed: 500,
};

const NETWORK: Record<NetworkErrorCode, number> = {
  INVALID_CIDR: 400,
  DOMAIN_NOT_SUPPORTED: 400,
  INVALID_CONFIG: 500,
  MISSING_BINARY: 500,
  COMMAND_FAILED: 500,
  EXHAUSTED: 503,
  RANGE_IN_USE: 500,
  UNKNOWN_SLOT: 500,
  SHUT_DOWN: 503,
  NOT_ROOT: 500,
};

const OCI: Record<OciErrorCode, number> = {
  bad_reference: 400,
  not_found: 404,
  unauthorized: 400,
  unsupported: 400,
  platform_mismatch: 400,
  unsafe_layer: 400,
  over_limit: 400,
  registry_unavailable: 502,
  registry_error: 502,
  digest_mismatch: 502,
  disk_full: 503,
  cache_full: 503,
};

describe('errors → HTTP: one mapping', () => {
  it('gives every domain error kind its status, with {code, message} as the body', () => {
    expect(Object.keys(STATUS).sort()).toEqual(Object.keys(KIND_STATUS).sort());
    for (const [kind, status] of Object.entries(KIND_STATUS)) {
      const r = errorBody(new DomainError(kind as DomainErrorKind, `a ${kind} error`));
      expect(r.status, kind).toBe(status);
      expect(r.body, kind).toEqual({ code: status, message: `a ${kind} error` });
    }
  });

  it('a capacity refusal always carries Retry-After; others only when given', () => {
    expect(errorBody(new DomainError('capacity', 'full')).retryAfter).toBe(1);
    expect(errorBody(new DomainError('capacity', 'full', 5)).retryAfter).toBe(5);
    expect(errorBody(new DomainError('unavailable', 'stopping', 5)).retryAfter).toBe(5);
    expect(errorBody(new DomainError('not_found', 'x')).retryAfter).toBeUndefined();
  });

  const modules = [
    [
      'snapshot',
      SNAPSHOT_ERROR_KIND,
      SNAPSHOT,
      (c: string) => new SnapshotError(c as SnapshotErrorCode, `s ${c}`),
    ],
    [
      'runtime',
      RUNTIME_ERROR_KIND,
      RUNTIME,
      (c: string) => new RuntimeError(c as RuntimeErrorCode, `r ${c}`),
    ],
    [
      'network',
      NETWORK_ERROR_KIND,
      NETWORK,
      (c: string) => new NetworkError(c as NetworkErrorCode, `n ${c}`),
    ],
    ['oci', OCI_ERROR_KIND, OCI, (c: string) => new OciError(c as OciErrorCode, `o ${c}`)],
  ] as const;

  for (const [name, table, expected, make] of modules) {
    it(`maps every ${name} error code`, () => {
      expect(Object.keys(table).sort()).toEqual(Object.keys(expected).sort());
      for (const [code, status] of Object.entries(expected)) {
        const err = make(code);
        expect(err, code).toBeInstanceOf(DomainError);
        const r = errorBody(err);
        expect(r.status, `${name} ${code}`).toBe(status);
        expect(r.body, code).toEqual({ code: status, message: err.message });
      }
    });
  }

  it('asks to retry when every network address is in use', () => {
    expect(errorBody(new NetworkError('EXHAUSTED', 'full')).retryAfter).toBe(5);
  });

  it('maps the other errors of the node', () => {
    expect(errorBody(new ImageBuildError('mmdebstrap failed')).status).toBe(500);
    expect(errorBody(new CaptureInvalidError('capture x: missing checkpoint.img')).status).toBe(500);
    expect(errorBody(new SandboxRecordError('newer')).status).toBe(409);
    expect(errorBody(sandboxNotFound('abc'))).toEqual({
      status: 502,
      body: { sandboxId: 'abc', code: 502, message: 'The sandbox was not found' },
    });
  });

  it('answers anything else as a 500 that does not leak its message', () => {
    expect(errorBody(new Error('secret path /x'))).toEqual({
      status: 500,
      body: { code: 500, message: 'internal error' },
    });
    expect(errorBody('a string')).toMatchObject({ status: 500 });
  });

  it('names the field Fastify refused, and keeps its other client statuses', async () => {
    const app = Fastify();
    app.setErrorHandler((err, _req, reply) => {
      const r = errorBody(err);
      void reply.status(r.status).send(r.body);
    });
    app.post(
      '/x',
      { schema: { body: { type: 'object', properties: { timeout: { type: 'integer', minimum: 1 } } } } },
      async () => 'ok',
    );
    const bad = await app.inject({ method: 'POST', url: '/x', payload: { timeout: 0 } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/^invalid timeout: /);
    const media = await app.inject({
      method: 'POST',
      url: '/x',
      payload: 'x',
      headers: { 'content-type': 'text/x' },
    });
    expect(media.statusCode).toBe(415);
    expect(media.json().code).toBe(415);
    await app.close();
  });

  it('gives faults the context they happened in, and leaves refusals as they are', () => {
    const runtime = new RuntimeError('restore_failed', 'runsc restore exited 1');
    const c = withContext(runtime, 'resume failed');
    expect(c).toMatchObject({
      kind: 'runtime_failure',
      message: 'resume failed: runsc restore exited 1',
      cause: runtime,
    });
    const full = new DomainError('capacity', 'full', 5);
    expect(withContext(full, 'resume failed')).toBe(full);
    expect(withContext(new Error('boom'), 'pause failed')).toMatchObject({
      kind: 'internal',
      message: 'pause failed: boom',
    });
  });

  it('finds the runtime output behind a fault, also when the fault was given context', () => {
    const start = new RuntimeError('not_ready', 'envd did not answer', 'console: envd crashed');
    expect(operatorDetail(withContext(start, 'sandbox failed to start'))).toBe('console: envd crashed');
    expect(operatorDetail(start)).toBe('console: envd crashed');
    expect(operatorDetail(new Error('boom'))).toBeUndefined();
    expect(operatorDetail('a string')).toBeUndefined();
  });
});
