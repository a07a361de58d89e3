import { beforeAll, describe, expect, it } from 'vitest';
import { api, URL_BASE, useTestServer } from '@agentenv/test-support/server';

let sandboxId: string;

useTestServer();
beforeAll(async () => {
  const r = await api('POST', '/sandboxes', { templateID: 'base', timeout: 120 });
  expect(r.status).toBe(201);
  sandboxId = r.json.sandboxID as string;
});

/** The control routes of one sandbox (SBX: its id). */
const SANDBOX_ROUTES: [string, string][] = [
  ['GET', '/sandboxes/SBX'],
  ['DELETE', '/sandboxes/SBX'],
  ['POST', '/sandboxes/SBX/timeout'],
  ['POST', '/sandboxes/SBX/refreshes'],
  ['POST', '/sandboxes/SBX/pause'],
  ['POST', '/sandboxes/SBX/resume'],
  ['POST', '/sandboxes/SBX/connect'],
  ['POST', '/v2/sandboxes/SBX/connect'],
  ['GET', '/sandboxes/SBX/metrics'],
  ['GET', '/sandboxes/SBX/logs'],
  ['PUT', '/sandboxes/SBX/network'],
];

describe('the open endpoints', () => {
  it('keeps /health and /metrics open', async () => {
    expect((await fetch(`${URL_BASE}/health`)).status).toBe(204);
    const m = await fetch(`${URL_BASE}/metrics`);
    expect(m.status).toBe(200);
    const text = await m.text();
    expect(text).toMatch(/aenv_sandboxes\{state="running"\} [1-9]/);
    expect(text).toMatch(/aenv_http_request_duration_seconds_bucket/);
    expect(text).toMatch(/aenv_lifecycle_stage_duration_seconds_count\{stage="create"\}/);
  });

  it('serves an OpenAPI document', async () => {
    const r = await fetch(`${URL_BASE}/openapi.json`);
    const doc = (await r.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v2/sandboxes', '/sandboxes/{sandboxID}/pause']),
    );
  });
});

describe('bad input', () => {
  it('answers 404 for an unknown sandbox', async () => {
    for (const [method, path] of SANDBOX_ROUTES) {
      const bodies: Record<string, unknown> = { refreshes: { duration: 10 }, network: {} };
      const body =
        method === 'GET' || method === 'DELETE'
          ? undefined
          : (bodies[path.split('/').pop()!] ?? { timeout: 10 });
      const r = await api(method, path.replace('SBX', 'nosuchsandbox'), body);
      expect([method, path, r.status]).toEqual([method, path, 404]);
      expect(r.json).toMatchObject({ code: 404 });
    }
  });

  it('rejects bad JSON, out-of-range values (naming the field) and huge bodies', async () => {
    const bad = await api('POST', '/sandboxes', '{"templateID": ');
    expect(bad.status).toBe(400);
    const range = await api('POST', '/sandboxes', { templateID: 'base', timeout: -5 });
    expect(range.status).toBe(400);
    expect(range.json.message).toMatch(/timeout/);
    // 0 is E2B's "time out now" (parity.test.ts); below it is out of range.
    const negative = await api('POST', `/sandboxes/${sandboxId}/timeout`, { timeout: -1 });
    expect(negative.status).toBe(400);
    const type = await api('POST', '/sandboxes', { templateID: 'base', metadata: { a: { nested: true } } });
    expect(type.status).toBe(400);
    expect(type.json.message).toMatch(/metadata/);
    const refresh = await api('POST', `/sandboxes/${sandboxId}/refreshes`, { duration: 4000 });
    expect(refresh.status).toBe(400);
    expect(refresh.json.message).toMatch(/duration/);
    const domain = await api('PUT', `/sandboxes/${sandboxId}/network`, { allowOut: ['example.com'] });
    expect(domain.status).toBe(400);
    expect(domain.json.message).toMatch(/domain/);
    const huge = await api('POST', '/sandboxes', {
      templateID: 'base',
      metadata: { big: 'x'.repeat(2 << 20) },
    });
    expect(huge.status).toBe(413);
    const page = await api('GET', '/v2/sandboxes?limit=1000');
    expect(page.status).toBe(400);
    const token = await api('GET', '/v2/sandboxes?nextToken=garbage');
    expect(token.status).toBe(400);
  });

  it('answers 409 for an operation in the wrong state', async () => {
    const r = await api('POST', `/sandboxes/${sandboxId}/resume`, { timeout: 60 });
    expect(r.status).toBe(409);
    expect((await api('POST', `/sandboxes/${sandboxId}/pause`)).status).toBe(204);
    expect((await api('POST', `/sandboxes/${sandboxId}/pause`)).status).toBe(409);
    expect((await api('POST', `/sandboxes/${sandboxId}/timeout`, { timeout: 30 })).status).toBe(409);
    const resumed = await api('POST', `/sandboxes/${sandboxId}/connect`, { timeout: 60 });
    expect(resumed.status).toBe(201);
    const again = await api('POST', `/sandboxes/${sandboxId}/connect`, { timeout: 60 });
    expect(again.status).toBe(200);
  });

  it('serialises concurrent operations on one sandbox', async () => {
    const results = await Promise.all([
      api('POST', `/sandboxes/${sandboxId}/pause`),
      api('POST', `/sandboxes/${sandboxId}/pause`),
      api('POST', `/sandboxes/${sandboxId}/connect`, { timeout: 60 }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 204, 409]);
    expect((await api('GET', `/sandboxes/${sandboxId}`)).json.state).toBe('running');
  });
});

describe('sandbox traffic', () => {
  it('reuses kept-alive proxy connections into a restored sandbox', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      for (const path of ['/health', '/envs']) {
        const r = await fetch(`${URL_BASE}${path}`, {
          headers: { 'e2b-sandbox-id': sandboxId, 'e2b-sandbox-port': '49983' },
        });
        await r.arrayBuffer();
        statuses.push(r.status);
      }
    }
    expect(statuses).toEqual(Array.from({ length: 16 }, (_, i) => (i % 2 ? 200 : 204)));
  });
});

describe('native additions', () => {
  it('reports the node and the sandbox logs', async () => {
    const nodes = await api('GET', '/nodes');
    expect(nodes.json[0]).toMatchObject({ status: 'ready', sandboxCount: expect.any(Number) });
    const logs = await api('GET', `/sandboxes/${sandboxId}/logs`);
    expect((logs.json.logEntries as { message: string }[]).map((l) => l.message)).toContain('sandbox paused');
  });

  it('changes egress rules at run time', async () => {
    expect(
      (await api('PUT', `/sandboxes/${sandboxId}/network`, { denyOut: ['203.0.113.0/24'] })).status,
    ).toBe(204);
    const info = await api('GET', `/sandboxes/${sandboxId}`);
    expect(info.json.network).toMatchObject({ denyOut: ['203.0.113.0/24'] });
  });
});
