import { request } from 'node:http';
import { Sandbox } from 'e2b';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, DOMAIN, getViaHost, PORT, useTestServer } from '@agentenv/test-support/server';

useTestServer();
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
});

const ENVD = 49983;
const PROXY = `http://127.0.0.1:${PORT}`;
const CSP = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads';

/** A server on :8080 in the sandbox that answers each GET with the request's header lines. */
const ECHO = `
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ''.join(f'{k}: {v}\\n' for k, v in self.headers.items()).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('0.0.0.0', 8080), H).serve_forever()
`;

/** Started detached: no command stream stays open (one reaching a paused sandbox would resume it). */
async function startEcho(sbx: Sandbox): Promise<void> {
  await sbx.files.write('/home/user/echo.py', ECHO);
  await sbx.commands.run('nohup python3 /home/user/echo.py >/dev/null 2>&1 &');
}

/** A request through the node's proxy routed by E2B's headers. */
const viaHeaders = (id: string, port: number, path: string, init: RequestInit = {}) =>
  fetch(`${PROXY}${path}`, {
    ...init,
    headers: { 'e2b-sandbox-id': id, 'e2b-sandbox-port': String(port), ...(init.headers as object) },
  });

/** A POST through the node's proxy with a `{port}-{id}.{domain}` Host: its status. */
function postViaHost(host: string, path: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: PORT, method: 'POST', path, headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A GET through the node's proxy with header names exactly as given: the body. */
function getRaw(headers: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: PORT, path: '/', headers }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}

const detail = async (id: string) =>
  (await api('GET', `/sandboxes/${id}`)).json as { state: string; endAt: string; envdAccessToken?: string };

describe('envd’s /init belongs to the node', () => {
  it('is refused from outside for a v1 sandbox (not secure), by every route, and the node keeps envd', async () => {
    const created = await api('POST', '/sandboxes', { templateID: 'base' });
    expect(created.status).toBe(201);
    const id = created.json.sandboxID as string;
    try {
      // A far-future timestamp would make envd ignore every later /init of the node.
      const attack = JSON.stringify({
        accessToken: 'attacker',
        envVars: { PWNED: '1' },
        defaultUser: 'root',
        timestamp: '2100-01-01T00:00:00Z',
      });
      const post = { method: 'POST', headers: { 'content-type': 'application/json' }, body: attack };
      const answers = [
        await viaHeaders(id, ENVD, '/init', post),
        await viaHeaders(id, ENVD, '/./init', post),
        await fetch(`${PROXY}/proxy/${id}/${ENVD}/init`, post),
      ];
      for (const r of answers) {
        expect(r.status).toBe(403);
        expect(((await r.json()) as { message: string }).message).toMatch(
          /\/init is called by the sandbox's node only/,
        );
      }
      expect(await postViaHost(`${ENVD}-${id}.${DOMAIN}`, '/init', attack)).toBe(403);

      const sbx = await Sandbox.connect(id);
      const r = await sbx.commands.run('echo "[$PWNED]" $(whoami) $E2B_SANDBOX_ID');
      expect(r.stdout.trim()).toBe(`[] user ${id}`);
    } finally {
      await api('DELETE', `/sandboxes/${id}`);
    }
  });
});

describe('traffic rules before side effects', () => {
  it('leaves a paused autoResume sandbox paused for a request without its traffic token', async () => {
    const created = await api('POST', '/v2/sandboxes', {
      templateID: 'base',
      autoPause: true,
      autoResume: { enabled: true },
      network: { allowPublicTraffic: false },
    });
    expect(created.status).toBe(201);
    const id = created.json.sandboxID as string;
    const token = created.json.trafficAccessToken as string;
    try {
      await startEcho(await Sandbox.connect(id));
      const withToken = { headers: { 'e2b-traffic-access-token': token } };
      await eventually(async () => expect((await viaHeaders(id, 8080, '/', withToken)).status).toBe(200));
      expect((await api('POST', `/sandboxes/${id}/pause`)).status).toBe(204);
      const paused = await detail(id);
      expect(paused.state, JSON.stringify((await api('GET', `/sandboxes/${id}/logs`)).json)).toBe('paused');

      expect((await viaHeaders(id, 8080, '/')).status).toBe(403);
      expect((await getViaHost(`8080-${id}.${DOMAIN}`)).status).toBe(403);
      expect((await fetch(`${PROXY}/proxy/${id}/8080/`)).status).toBe(403);
      expect(await detail(id)).toMatchObject({ state: 'paused', endAt: paused.endAt });

      const r = await viaHeaders(id, 8080, '/', withToken);
      expect(r.status).toBe(200);
      expect((await detail(id)).state).toBe('running');
    } finally {
      await api('DELETE', `/sandboxes/${id}`);
    }
  });
});

describe('sandbox pages and headers', () => {
  it('serves /proxy/ pages under a sandbox CSP; the Host and header names reach the server as E2B sends them', async () => {
    const plain = await Sandbox.create();
    const masked = await Sandbox.create({ network: { maskRequestHost: 'localhost:${PORT}' } });
    try {
      await Promise.all([startEcho(plain), startEcho(masked)]);
      const host = plain.getHost(8080);
      await eventually(async () => expect((await getViaHost(host)).status).toBe(200));
      // Host routing is an origin of its own; the /proxy/ path shares the node's with the dashboard.
      const byHost = await fetch(`${PROXY}/`, { headers: { host } });
      expect(byHost.headers.get('content-security-policy')).toBeNull();
      const native = await fetch(`${PROXY}/proxy/${plain.sandboxId}/8080/`);
      expect(native.headers.get('content-security-policy')).toBe(CSP);

      // As Go's proxy sends them: Host as Host, whatever the client wrote; other names as written.
      const seen = await getRaw(['host', host, 'X-Mixed-Case', '1', 'x-lower', '2']);
      expect(seen).toContain(`Host: ${host}\nX-Mixed-Case: 1\nx-lower: 2\n`);
      await eventually(async () =>
        expect((await getViaHost(masked.getHost(8080), '/')).body).toContain('Host: localhost:8080\n'),
      );
      const info = await api('GET', `/sandboxes/${masked.sandboxId}`);
      expect(info.json.network).toMatchObject({ maskRequestHost: 'localhost:${PORT}' });
    } finally {
      await Promise.all([plain.kill(), masked.kill()]);
    }
  });
});

describe('restores never inherit the source’s tokens', () => {
  it('gives a snapshot’s sandbox and a fork’s child access and traffic tokens of their own', async () => {
    const parent = await Sandbox.create({ network: { allowPublicTraffic: false }, timeoutMs: 600_000 });
    const made: Sandbox[] = [];
    try {
      const parentEnvd = (await detail(parent.sandboxId)).envdAccessToken!;
      const parentTraffic = parent.trafficAccessToken!;
      expect(parentEnvd).toBeTruthy();
      const snap = await parent.createSnapshot();
      made.push(await Sandbox.create(snap.snapshotId, { network: { allowPublicTraffic: false } }));
      const children = (await parent.fork({ count: 1 } as never)) as unknown as Sandbox[];
      made.push(...children);
      for (const child of made) {
        const envd = (await detail(child.sandboxId)).envdAccessToken!;
        expect(envd).toBeTruthy();
        expect(envd).not.toBe(parentEnvd);
        expect(child.trafficAccessToken).toBeTruthy();
        expect(child.trafficAccessToken).not.toBe(parentTraffic);
        // envd in the child knows only the child's token.
        const envs = (token: string) =>
          viaHeaders(child.sandboxId, ENVD, '/envs', { headers: { 'x-access-token': token } });
        expect((await envs(parentEnvd)).status).toBe(401);
        expect((await envs(envd)).status).toBe(200);
        expect((await child.commands.run('echo $E2B_SANDBOX_ID')).stdout.trim()).toBe(child.sandboxId);
        // Its ports know only the child's traffic token.
        const port = (token: string) =>
          viaHeaders(child.sandboxId, 8080, '/', { headers: { 'e2b-traffic-access-token': token } });
        expect((await port(parentTraffic)).status).toBe(403);
        expect((await port(child.trafficAccessToken!)).status).not.toBe(403);
      }
    } finally {
      await Promise.all([parent, ...made].map((s) => s.kill()));
    }
  });
});
