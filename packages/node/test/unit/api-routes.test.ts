import { describe, expect, it } from 'vitest';
import { FAKE_API_KEY, useFakeApp } from '@agentenv/test-support/fakes';

/** One node and app for the file (building an app takes a while); each test kills what it made. */
const fake = useFakeApp({ maxSandboxes: 3 });

describe('API routes over the orchestrator', () => {
  it('needs the API key except on /health', async () => {
    const { app } = fake;
    expect((await app.inject({ url: '/health' })).statusCode).toBe(204);
    const r = await app.inject({ url: '/v2/sandboxes' });
    expect(r.statusCode).toBe(401);
    expect(r.json()).toEqual({ code: 401, message: 'missing X-API-Key header' });
    const none = await app.inject({ url: '/nowhere?x=1', headers: { 'x-api-key': FAKE_API_KEY } });
    expect(none.statusCode).toBe(404);
    expect(none.json()).toEqual({ code: 404, message: 'no route for GET /nowhere' });
  });

  it('creates, reads, lists and kills sandboxes', async () => {
    const { call, node } = fake;
    const created = await call('POST', '/v2/sandboxes', { templateID: 'base', metadata: { a: 'b' } });
    expect(created.status).toBe(201);
    const id = created.json.sandboxID as string;
    expect(created.headers['x-agentenv-sandbox-id']).toBe(id);
    // v2 creates are secured.
    expect(created.json).toMatchObject({
      templateID: 'base',
      envdVersion: '0.6.4',
      envdAccessToken: expect.any(String),
    });
    const got = await call('GET', `/sandboxes/${id}`);
    expect(got.json).toMatchObject({
      sandboxID: id,
      state: 'running',
      metadata: { a: 'b' },
      lifecycle: { onTimeout: 'pause' },
    });
    expect((await call('GET', '/v2/sandboxes?metadata=a%3Db')).json).toHaveLength(1);
    expect((await call('DELETE', `/sandboxes/${id}`)).status).toBe(204);
    expect(await call('DELETE', `/sandboxes/${id}`)).toMatchObject({
      status: 404,
      json: { code: 404, message: `sandbox ${id} not found` },
    });
    expect(node.slots.used).toBe(0);
  });

  it('refuses creates beyond capacity with 429 and Retry-After', async () => {
    const { call } = fake;
    for (let i = 0; i < 3; i++) expect((await call('POST', '/sandboxes', {})).status).toBe(201);
    const refused = await call('POST', '/sandboxes', {});
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('5');
    expect(refused.json.message).toMatch(/maximum of 3 sandboxes/);
  });

  it('answers a runtime failure of a create as a 500 that says what failed', async () => {
    const { call, node } = fake;
    node.driver.faults.failNext('restore');
    expect(await call('POST', '/sandboxes', {})).toMatchObject({
      status: 500,
      json: { code: 500, message: 'sandbox failed to start: fake: the restore failed' },
    });
  });

  it('pauses and resumes through connect and the old resume, with their statuses', async () => {
    const { call } = fake;
    const id = (await call('POST', '/sandboxes', {})).json.sandboxID as string;
    expect((await call('POST', `/sandboxes/${id}/pause`)).status).toBe(204);
    expect(await call('POST', `/sandboxes/${id}/pause`)).toMatchObject({
      status: 409,
      json: { message: `sandbox ${id} is already paused` },
    });
    expect((await call('GET', `/sandboxes/${id}`)).json.state).toBe('paused');
    expect((await call('POST', `/sandboxes/${id}/connect`, { timeout: 60 })).status).toBe(201);
    expect((await call('POST', `/sandboxes/${id}/connect`, { timeout: 60 })).status).toBe(200);
    expect((await call('POST', `/sandboxes/${id}/resume`, {})).status).toBe(409);
  });

  it('a pause asked to wait until stored answers stored, and GET says so', async () => {
    const { call } = fake;
    const id = (await call('POST', '/sandboxes', {})).json.sandboxID as string;
    expect((await call('GET', `/sandboxes/${id}`)).json.pauseStored).toBeUndefined();
    expect(await call('POST', `/sandboxes/${id}/pause?wait=soon`)).toMatchObject({ status: 400 });
    const paused = await call('POST', `/sandboxes/${id}/pause?wait=stored`);
    expect(paused.status).toBe(204);
    expect(paused.headers['x-aenv-pause-stored']).toBe('true');
    expect((await call('GET', `/sandboxes/${id}`)).json).toMatchObject({
      state: 'paused',
      pauseStored: true,
    });
    expect((await call('DELETE', `/sandboxes/${id}`)).status).toBe(204);
  });

  it('forks, with a failed child as an error body from the one mapping', async () => {
    const { call, node } = fake;
    const id = (await call('POST', '/sandboxes', {})).json.sandboxID as string;
    node.driver.faults.failNext('restore');
    const r = await call('POST', `/sandboxes/${id}/fork`, { count: 3 });
    expect(r.status).toBe(201);
    const errors = (r.json as { error?: { code: number; message: string } }[]).flatMap((x) =>
      x.error ? [x.error] : [],
    );
    expect(errors.sort((a, b) => a.code - b.code)).toEqual([
      { code: 429, message: 'this node runs its maximum of 3 sandboxes' },
      { code: 500, message: 'sandbox failed to start: fake: the restore failed' },
    ]);
    expect((r.json as { sandbox?: { sandboxID: string } }[]).filter((x) => x.sandbox)).toHaveLength(1);
    expect((await call('POST', `/sandboxes/${id}/fork`, { count: 0 })).status).toBe(400);
  });

  it('snapshots a sandbox and starts another from it; lists them', async () => {
    const { call } = fake;
    const id = (await call('POST', '/sandboxes', {})).json.sandboxID as string;
    const snap = await call('POST', `/sandboxes/${id}/snapshots`, { name: 'mine' });
    expect(snap).toMatchObject({ status: 201, json: { names: ['mine'], sandboxID: id } });
    expect((await call('POST', '/sandboxes', { templateID: 'mine' })).status).toBe(201);
    expect((await call('GET', `/snapshots?sandboxID=${id}`)).json).toHaveLength(1);
    expect((await call('POST', `/sandboxes/${id}/snapshots`, { name: 'mine' })).status).toBe(409);
    expect((await call('GET', '/snapshots/nope')).status).toBe(404);
  });

  it('names the field of a bad request and an unknown template', async () => {
    const { call } = fake;
    expect(await call('POST', '/sandboxes', { timeout: 0 })).toMatchObject({
      status: 400,
      json: { message: expect.stringMatching(/timeout/) },
    });
    expect(await call('POST', '/sandboxes', { templateID: 'no-such-template' })).toMatchObject({
      status: 400,
      json: { message: "template 'no-such-template' not found" },
    });
    const id = (await call('POST', '/sandboxes', {})).json.sandboxID as string;
    expect((await call('PUT', `/sandboxes/${id}/network`, { allowOut: ['example.com'] })).status).toBe(400);
  });

  it('starts a sandbox straight from an image', async () => {
    const { call } = fake;
    const r = await call('POST', '/sandboxes-cold', { image: 'busybox:1', memoryMB: 256 });
    expect(r).toMatchObject({ status: 201, json: { templateID: 'busybox:1' } });
  });

  it('reports lifecycle events and states in /metrics', async () => {
    const { call, app } = fake;
    const id = (await call('POST', '/sandboxes', {})).json.sandboxID as string;
    await call('POST', `/sandboxes/${id}/pause`);
    const text = (await app.inject({ url: '/metrics' })).body;
    expect(text).toMatch(/aenv_lifecycle_events_total\{type="paused",reason="request"\} [1-9]/);
    expect(text).toMatch(/aenv_sandboxes\{state="paused"\} 1/);
  });
});
