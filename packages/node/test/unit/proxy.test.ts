import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { FakeNode } from '@agentenv/test-support/fakes';
import { SandboxProxy } from '../../src/proxy/proxy.js';
import { SANDBOX_PAGE_CSP } from '../../src/proxy/headers.js';
import { routeRequest } from '@agentenv/common';
import { ENVD_PORT } from '@agentenv/protocol';

/** A server on 127.0.0.1 standing in for a port inside every fake sandbox. */
let upstream: Server;
let sandboxPort: number;
let proxyServer: Server;
let proxyPort: number;
let node: FakeNode;
let proxy: SandboxProxy;
/** Open requests of the sandbox as the upstream saw them, for the activity check. */
const seenOpen: number[] = [];

const listen = (s: Server) =>
  new Promise<number>((r) => s.listen(0, '127.0.0.1', () => r((s.address() as AddressInfo).port)));

beforeAll(async () => {
  upstream = createServer((req, res) => {
    const id = String(req.headers['x-test-sandbox'] ?? '');
    if (id) seenOpen.push(node.orchestrator.activity.openRequests(id));
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () =>
      res.end(
        JSON.stringify({
          path: req.url,
          body,
          token: req.headers['e2b-traffic-access-token'] ?? null,
          raw: req.rawHeaders,
        }),
      ),
    );
  });
  sandboxPort = await listen(upstream);
  node = new FakeNode({ hostAddress: '127.0.0.1', maxSandboxes: 2 });
  // A short body deadline, so the slow-loris case is quick; every other body is sent at once.
  proxy = new SandboxProxy(node.orchestrator, node.logger, { bodyIdleMs: 300 });
  node.orchestrator.beforeCapture((id, why) => proxy.drain(id, why));
  proxyServer = createServer((req, res) => {
    const route = routeRequest(req.url ?? '/', req.headers, [])!;
    void proxy.handle(route, req, res);
  });
  proxyServer.on('upgrade', (req, socket, head) => {
    void proxy.upgrade(routeRequest(req.url ?? '/', req.headers, [])!, req, socket as never, head);
  });
  proxyPort = await listen(proxyServer);
});

afterAll(async () => {
  proxy.close();
  await new Promise((r) => proxyServer.close(r));
  await new Promise((r) => upstream.close(r));
});

async function call(
  id: string,
  opts: { path?: string; port?: number; headers?: Record<string, string>; body?: string } = {},
) {
  const native = opts.path?.startsWith('/proxy/');
  const r = await fetch(`http://127.0.0.1:${proxyPort}${opts.path ?? '/hello?x=1'}`, {
    method: opts.body ? 'POST' : 'GET',
    headers: {
      ...(native ? {} : { 'e2b-sandbox-id': id, 'e2b-sandbox-port': String(opts.port ?? sandboxPort) }),
      'x-test-sandbox': id,
      ...opts.headers,
    },
    ...(opts.body ? { body: opts.body } : {}),
  });
  const text = await r.text();
  return {
    status: r.status,
    retryAfter: r.headers.get('retry-after'),
    csp: r.headers.get('content-security-policy'),
    json: text ? JSON.parse(text) : undefined,
  };
}

/** Sends an upgrade request on a raw socket and returns what the proxy answered. */
function upgrade(id: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(proxyPort, '127.0.0.1', () =>
      s.write(
        `GET /ws HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n` +
          `e2b-sandbox-id: ${id}\r\ne2b-sandbox-port: ${sandboxPort}\r\n\r\n`,
      ),
    );
    let data = '';
    s.on('data', (c) => (data += c));
    s.on('end', () => resolve(data));
    s.on('error', reject);
  });
}

async function sandbox(over: Parameters<FakeNode['create']>[0] = {}) {
  return (await node.create(over)).sandboxId;
}

describe('sandbox proxy', () => {
  it('forwards to the sandbox, body and path included, and counts the request as activity', async () => {
    const id = await sandbox();
    const r = await call(id, { body: 'ping' });
    expect(r).toMatchObject({ status: 200, json: { path: '/hello?x=1', body: 'ping' } });
    expect(seenOpen.at(-1)).toBe(1);
    expect(node.orchestrator.activity.openRequests(id)).toBe(0);
    node.clock.advance(5000);
    expect(node.orchestrator.activity.idleFor(id)).toBe(5000);
    await node.orchestrator.kill(id);
  });

  it('answers E2B’s 502 for an unknown sandbox, and for a paused one without autoResume', async () => {
    expect(await call('nosuchsandbox')).toEqual({
      status: 502,
      retryAfter: null,
      csp: null,
      json: { sandboxId: 'nosuchsandbox', message: 'The sandbox was not found', code: 502 },
    });
    const id = await sandbox();
    await node.orchestrator.pause(id);
    expect((await call(id)).json).toEqual({ sandboxId: id, message: 'The sandbox was not found', code: 502 });
    // The native path says it is paused.
    expect(await call(id, { path: `/proxy/${id}/${sandboxPort}/x` })).toMatchObject({
      status: 410,
      json: { code: 410, message: `sandbox ${id} is paused` },
    });
    await node.orchestrator.kill(id);
  });

  it('resumes a paused sandbox with autoResume and forwards; a refusal keeps its status and Retry-After', async () => {
    const id = await sandbox({ autoResume: true });
    await node.orchestrator.pause(id);
    expect((await call(id)).status).toBe(200);
    expect(node.orchestrator.get(id).state).toBe('running');
    expect(node.observer.of(id).at(-1)).toBe('resumed:auto_resume');
    expect(Date.parse(node.orchestrator.get(id).endAt) - node.clock.now()).toBeGreaterThanOrEqual(300_000);

    await node.orchestrator.pause(id);
    const a = await sandbox();
    const b = await sandbox();
    const refused = await call(id);
    expect(refused).toMatchObject({ status: 429, retryAfter: '5', json: { code: 429 } });
    expect(refused.json.message).toMatch(/maximum of 2 sandboxes/);
    expect(node.orchestrator.get(id).state).toBe('paused');
    for (const x of [a, b, id]) await node.orchestrator.kill(x);
  });

  it('does not wake a filesystem-only pause, even with autoResume: a cold boot must be asked for', async () => {
    const id = await sandbox({ autoResume: true });
    await node.orchestrator.pause(id);
    // The proxy reads only the kind recorded with the pause; how it is taken is the orchestrator's.
    node.store.update({ ...node.orchestrator.get(id), pauseKind: 'filesystem' });
    expect((await call(id)).json).toEqual({ sandboxId: id, message: 'The sandbox was not found', code: 502 });
    expect(await call(id, { path: `/proxy/${id}/${sandboxPort}/x` })).toMatchObject({
      status: 409,
      json: { code: 409, message: 'filesystem-only snapshot must be resumed explicitly' },
    });
    expect(node.orchestrator.get(id).state).toBe('paused');
    await node.orchestrator.kill(id);
  });

  it('needs the traffic token on other ports of a private sandbox', async () => {
    const id = await sandbox({ allowPublicTraffic: false });
    const token = node.orchestrator.get(id).trafficAccessToken!;
    expect(await call(id)).toMatchObject({
      status: 403,
      json: { code: 403, message: 'missing or invalid traffic access token' },
    });
    expect(await call(id, { headers: { 'e2b-traffic-access-token': 'wrong' } })).toMatchObject({
      status: 403,
    });
    const ok = await call(id, { headers: { 'e2b-traffic-access-token': token } });
    // The token is the proxy's to check: it does not reach the sandbox.
    expect(ok).toMatchObject({ status: 200, json: { token: null } });
    await node.orchestrator.kill(id);
  });

  it('refuses routing without a port, and says when the sandbox port does not answer', async () => {
    expect(await call('abc', { port: 70000 })).toMatchObject({
      status: 400,
      json: { code: 400, message: 'sandbox routing needs a sandbox id and a port (1-65535)' },
    });
    const id = await sandbox();
    const closed = createServer();
    const port = await listen(closed);
    await new Promise((r) => closed.close(r));
    const r = await call(id, { port });
    expect(r.status).toBe(502);
    expect(r.json).toMatchObject({
      sandboxId: id,
      code: 502,
      message: expect.stringMatching(/^sandbox connection failed/),
    });
    await node.orchestrator.kill(id);
  });

  it('waits for an operation under way (a snapshot) and then forwards', async () => {
    const id = await sandbox();
    const held = node.driver.faults.hold('checkpoint');
    const snap = node.orchestrator.snapshot(id);
    await held.reached;
    const req = call(id);
    held.release();
    expect((await req).status).toBe(200);
    await snap;
    await node.orchestrator.kill(id);
  });

  it('refuses a WebSocket upgrade with the status, its own reason phrase, and the same body', async () => {
    const id = await sandbox({ allowPublicTraffic: false });
    const forbidden = await upgrade(id);
    expect(forbidden.split('\r\n')[0]).toBe('HTTP/1.1 403 Forbidden');
    expect(JSON.parse(forbidden.slice(forbidden.indexOf('\r\n\r\n') + 4))).toEqual({
      code: 403,
      message: 'missing or invalid traffic access token',
    });
    const unknown = await upgrade('nosuchsandbox');
    expect(unknown.split('\r\n')[0]).toBe('HTTP/1.1 502 Bad Gateway');
    expect(unknown).toContain('"message":"The sandbox was not found"');
    await node.orchestrator.kill(id);
  });

  it('checks the traffic token before an auto-resume: a refused request leaves the sandbox paused', async () => {
    const id = await sandbox({ autoResume: true, allowPublicTraffic: false });
    const token = node.orchestrator.get(id).trafficAccessToken!;
    await node.orchestrator.pause(id);
    const endAt = node.orchestrator.get(id).endAt;
    expect(await call(id)).toMatchObject({
      status: 403,
      json: { message: 'missing or invalid traffic access token' },
    });
    expect(await call(id, { headers: { 'e2b-traffic-access-token': 'wrong' } })).toMatchObject({
      status: 403,
    });
    expect(node.orchestrator.get(id)).toMatchObject({ state: 'paused', endAt });
    expect(node.observer.of(id)).not.toContain('resumed:auto_resume');
    expect((await call(id, { headers: { 'e2b-traffic-access-token': token } })).status).toBe(200);
    expect(node.orchestrator.get(id).state).toBe('running');
    await node.orchestrator.kill(id);
  });

  it('resumes a paused secure sandbox through envd only for a request with its access token', async () => {
    const id = await sandbox({ autoResume: true, secure: true });
    const token = node.orchestrator.get(id).envdAccessToken!;
    await node.orchestrator.pause(id);
    expect(await call(id, { port: ENVD_PORT, path: '/health' })).toMatchObject({ status: 401 });
    expect(node.orchestrator.get(id).state).toBe('paused');
    // Past the check, the resume happens (nothing listens on envd's port of the fake sandbox).
    await call(id, { port: ENVD_PORT, path: '/health', headers: { 'x-access-token': token } });
    expect(node.orchestrator.get(id).state).toBe('running');
    await node.orchestrator.kill(id);
  });

  it.each(['/init', '/./init', '/INIT/', '/a/../init?x=1', '\\init'])(
    'refuses envd’s node-only %s from outside, for any sandbox, before looking it up',
    async (path) => {
      const id = await sandbox();
      const refused = {
        status: 403,
        json: {
          code: 403,
          message: expect.stringMatching(/^envd's \/init is called by the sandbox's node only/),
        },
      };
      expect(await call(id, { port: ENVD_PORT, path, body: '{}' })).toMatchObject(refused);
      expect(await call('nosuchsandbox', { port: ENVD_PORT, path, body: '{}' })).toMatchObject(refused);
      expect(
        await call(id, { path: `/proxy/${id}/${ENVD_PORT}${path.replace('\\', '/')}`, body: '{}' }),
      ).toMatchObject(refused);
      // Another port's /init is the sandbox's own.
      expect(await call(id, { path, body: '{}' })).toMatchObject({ status: 200 });
      await node.orchestrator.kill(id);
    },
  );

  it('serves the /proxy/ path under a sandbox CSP, host and header routes without one', async () => {
    const id = await sandbox();
    expect((await call(id, { path: `/proxy/${id}/${sandboxPort}/page` })).csp).toBe(SANDBOX_PAGE_CSP);
    expect(SANDBOX_PAGE_CSP).not.toMatch(/allow-same-origin/);
    expect((await call(id)).csp).toBeNull();
    await node.orchestrator.kill(id);
  });

  it('sends header names as the client spelled them, and the Host its maskRequestHost says', async () => {
    const plain = await sandbox();
    const masked = await sandbox({ maskRequestHost: 'localhost:${PORT}' });
    const seen = async (id: string) =>
      (
        await rawRequest(
          `GET /h HTTP/1.1\r\nHost: 8080-${id}.example.test\r\nX-Mixed-Case: 1\r\n` +
            `E2B-Sandbox-Id: ${id}\r\nE2B-Sandbox-Port: ${sandboxPort}\r\nConnection: close\r\n\r\n`,
        )
      ).json!.raw!;
    const plainRaw = await seen(plain);
    expect(plainRaw).toEqual(
      expect.arrayContaining(['Host', `8080-${plain}.example.test`, 'X-Mixed-Case', '1']),
    );
    expect(plainRaw).not.toContain('E2B-Sandbox-Id');
    const maskedRaw = await seen(masked);
    expect(maskedRaw.slice(maskedRaw.indexOf('Host'), maskedRaw.indexOf('Host') + 2)).toEqual([
      'Host',
      `localhost:${sandboxPort}`,
    ]);
    expect(maskedRaw.filter((h) => h.toLowerCase() === 'host')).toHaveLength(1);
    for (const id of [plain, masked]) await node.orchestrator.kill(id);
  });

  it.each([
    ['a small body, read whole first', 10],
    ['a large body, streamed', 1 << 20],
  ])('answers 408 to a client that stops sending %s, and ends the request', async (_, length) => {
    const id = await sandbox();
    const answer = await rawRequest(
      `POST /upload HTTP/1.1\r\nHost: x\r\nE2B-Sandbox-Id: ${id}\r\nE2B-Sandbox-Port: ${sandboxPort}\r\n` +
        `Content-Length: ${length}\r\n\r\nabc`,
    );
    expect(answer).toMatchObject({
      status: 408,
      json: { code: 408, message: expect.stringMatching(/request body stalled/) },
    });
    await eventually(() => expect(node.orchestrator.activity.openRequests(id)).toBe(0));
    await node.orchestrator.kill(id);
  });
});

/**
 * Writes `head` on a raw socket (header names as written, a body it may leave unfinished) and
 * reads the answer until the proxy closes the connection (`Connection: close`, or after a 408):
 * its status and JSON body.
 */
function rawRequest(
  head: string,
): Promise<{ status: number; json: { code?: number; message?: string; raw?: string[] } | undefined }> {
  return new Promise((resolve, reject) => {
    const s = connect(proxyPort, '127.0.0.1', () => s.write(head));
    let data = '';
    s.on('data', (c) => (data += c));
    s.on('error', reject);
    s.on('end', () => {
      const status = Number(data.split(' ')[1]);
      let body = data.slice(data.indexOf('\r\n\r\n') + 4);
      // A chunked answer (the upstream's echo): its one chunk.
      if (/transfer-encoding: chunked/i.test(data)) body = body.split('\r\n')[1] ?? '';
      resolve({ status, json: body ? JSON.parse(body) : undefined });
    });
  });
}
