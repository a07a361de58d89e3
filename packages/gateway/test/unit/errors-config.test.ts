import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GatewayConfigError, loadGatewayConfig, parseAddr } from '../../src/config.js';
import { ask } from '../../src/context.js';
import { DomainError, checkApiKey, errorBody } from '@agentenv/common';
import { Code, ConnectError } from '@connectrpc/connect';
import { mapped } from '../../src/scheduler/connect.js';
import { PlacementRefused, SchedulerUnavailable } from '../../src/scheduler/scheduler.js';

describe('gateway errors', () => {
  it.each([
    ['not_found', 404],
    ['bad_gateway', 502],
    ['timeout', 504],
    ['unavailable', 503],
    ['capacity', 429],
    ['gone', 410],
  ] as const)('%s → %i with {code, message}', (kind, status) => {
    expect(errorBody(new DomainError(kind, 'why', 7))).toEqual({
      status,
      body: { code: status, message: 'why' },
      retryAfter: 7,
    });
  });

  it('refuses a key with 401 through the check the node uses', () => {
    let err: unknown;
    try {
      checkApiKey({ 'x-api-key': 'wrong' }, ['X-API-Key', 'wrong'], 'e2b_right');
    } catch (e) {
      err = e;
    }
    expect(errorBody(err)).toEqual({ status: 401, body: { code: 401, message: 'invalid API key' } });
  });

  it('hides unexpected errors as 500', () => {
    expect(errorBody(new Error('secret detail'))).toEqual({
      status: 500,
      body: { code: 500, message: 'internal error' },
    });
  });

  it('turns scheduler failures into 503 and a full cluster into 429', async () => {
    await expect(ask(() => Promise.reject(new SchedulerUnavailable('ECONNREFUSED')))).rejects.toMatchObject({
      kind: 'unavailable',
      message: expect.stringContaining('scheduler'),
    });
    await expect(
      ask(() => Promise.reject(new PlacementRefused('cluster_full', 'all full', 4))),
    ).rejects.toMatchObject({ kind: 'capacity', retryAfter: 4 });
    await expect(
      ask(() => Promise.reject(new PlacementRefused('no_healthy_node', 'none', 2))),
    ).rejects.toMatchObject({ kind: 'unavailable' });
  });
});

describe('scheduler call failures', () => {
  it('are 503 when the scheduler cannot be reached, 429 when a placement is not decided in time', () => {
    const refused = new ConnectError(
      'connect ECONNREFUSED',
      Code.Unavailable,
      undefined,
      undefined,
      Object.assign(new Error('x'), { code: 'ECONNREFUSED' }),
    );
    expect(mapped(refused, 'Schedule')).toBeInstanceOf(SchedulerUnavailable);
    expect(mapped(new ConnectError('timed out', Code.DeadlineExceeded), 'Schedule')).toMatchObject({
      reason: 'cluster_full',
    });
    expect(mapped(new ConnectError('timed out', Code.DeadlineExceeded), 'LookupNode')).toBeInstanceOf(
      SchedulerUnavailable,
    );
    expect(mapped(new ConnectError('no node has room', Code.ResourceExhausted), 'Schedule')).toMatchObject({
      reason: 'cluster_full',
    });
    expect(mapped(new ConnectError('no healthy node', Code.Unavailable), 'Schedule')).toMatchObject({
      reason: 'no_healthy_node',
    });
  });
});

describe('gateway config', () => {
  const KEY = 'e2b_0123456789';

  it('has defaults and needs the API key', () => {
    expect(() => loadGatewayConfig({})).toThrow(/AENV_API_KEY/);
    const c = loadGatewayConfig({ AENV_API_KEY: KEY });
    expect(c).toMatchObject({
      host: '0.0.0.0',
      port: 8080,
      schedulerUrl: 'http://127.0.0.1:9090',
      domains: [],
    });
    expect(c.tls).toBeUndefined();
  });

  it('reads addresses, domains, TLS and limits from the environment', () => {
    const c = loadGatewayConfig({
      AENV_API_KEY: KEY,
      GATEWAY_ADDR: '127.0.0.1:19900',
      AENV_SANDBOX_PROXY_DOMAINS: 'a.test, b.test',
      AENV_TLS_CERT: '/c.pem',
      AENV_TLS_KEY: '/k.pem',
      GATEWAY_CREATE_QUEUE: '7',
      AENV_SCHEDULER_URL: 'http://s1:9090, http://s2:9090',
    });
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 19900,
      domains: ['a.test', 'b.test'],
      tls: { certPath: '/c.pem', keyPath: '/k.pem' },
      maxQueuedCreates: 7,
      schedulerUrl: 'http://s1:9090, http://s2:9090',
    });
    expect(parseAddr('[::1]:80')).toEqual({ host: '::1', port: 80 });
  });

  it.each([
    { GATEWAY_ADDR: 'nope' },
    { AENV_TLS_CERT: '/c.pem' },
    { GATEWAY_QUEUE_WAIT_MS: '0' },
    { AENV_SCHEDULER_URL: 'not a url' },
    { AENV_SCHEDULER_URL: 'http://a:9090,,ftp://b' },
  ])('refuses %o', (env) => {
    expect(() => loadGatewayConfig({ AENV_API_KEY: KEY, ...env })).toThrow(GatewayConfigError);
  });

  it('takes the key from AENV_API_KEY_FILE, trimmed, and refuses a short or unreadable one', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gw-key-'));
    try {
      writeFileSync(path.join(dir, 'key'), `${KEY}\n`);
      writeFileSync(path.join(dir, 'short'), 'e2b_01\n');
      expect(loadGatewayConfig({ AENV_API_KEY_FILE: path.join(dir, 'key') }).apiKey).toBe(KEY);
      for (const env of [{ AENV_API_KEY: 'k' }, { AENV_API_KEY_FILE: path.join(dir, 'short') }])
        expect(() => loadGatewayConfig(env)).toThrow(/at least 8 characters/);
      expect(() => loadGatewayConfig({ AENV_API_KEY_FILE: path.join(dir, 'absent') })).toThrow(
        /cannot read AENV_API_KEY_FILE/,
      );
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});
