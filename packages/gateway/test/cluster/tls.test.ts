import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { connect } from 'node:http2';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWildcardCerts, type TestCerts } from './certs.js';
import {
  removeCgroups,
  startNode,
  TEST_CLUSTER_DOMAIN as DOMAIN,
  TEST_CLUSTER_KEY as API_KEY,
  TestCluster,
  type Proc,
} from '@agentenv/test-support/cluster';

/** A loopback address of this suite's own, so the edge can have port 443 as E2B users expect. */
const EDGE = '127.0.9.9';
const CLIENT = fileURLToPath(new URL('./tls-client.mjs', import.meta.url));
const PRELOAD = fileURLToPath(new URL('./test-domain.mjs', import.meta.url));

/** Runs the SDK client in a child process that trusts the test CA, as a user's process would. */
export async function runTlsClient(certs: TestCerts): Promise<Record<string, unknown>> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', PRELOAD, CLIENT], {
    env: {
      ...process.env,
      NODE_EXTRA_CA_CERTS: certs.caPath,
      AENV_TEST_DOMAIN: DOMAIN,
      AENV_TEST_DOMAIN_ADDRESS: EDGE,
      E2B_API_URL: `https://api.${DOMAIN}`,
      E2B_DOMAIN: DOMAIN,
      E2B_API_KEY: API_KEY,
      E2B_SANDBOX_URL: '',
      E2B_DEBUG: '',
    },
    timeout: 240_000,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
}

/**
 * What the SDK user saw over TLS at `https://{port}-{id}.{domain}`: a private sandbox port
 * (allowPublicTraffic: false) over HTTP/1.1, HTTP/2, SSE and WebSocket with the traffic token and
 * refused without it, and a paused sandbox resumed by traffic that carries the token only.
 */
export function expectServedOverTls(out: Record<string, unknown>): void {
  expect(out.echo).toBe('over-tls');
  expect(out.host).toBe(`8080-${String(out.sandboxId)}.${DOMAIN}`);
  expect(out.http1).toBe('served over tls\n');
  expect(out.withoutToken).toBe(403);
  expect(out.wrongToken).toBe(403);
  expect(out.alpn).toBe('h2');
  expect(out.http2Status).toBe(200);
  expect(out.http2).toBe('served over tls\n');
  expect(out.sse).toEqual({
    type: 'text/event-stream',
    body: 'data: tick 0\n\ndata: tick 1\n\ndata: tick 2\n\n',
  });
  expect(out.websocket).toEqual({ status: 101, message: 'echo: hello over tls' });
  expect(out.websocketWithoutToken).toEqual({ status: 403 });
  expect(out.pausedWithoutToken).toBe(403);
  expect(out.stateAfterRefusal).toBe('paused');
  expect(out.resumed).toEqual({ status: 200, body: 'served over tls\n' });
  expect(out.stateAfterTraffic).toBe('running');
}

/** ALPN as a client sees it: h2 when offered, HTTP/1.1 otherwise. */
export async function expectAlpn(certs: TestCerts): Promise<void> {
  const session = connect(`https://${EDGE}`, { ca: certs.ca, servername: `api.${DOMAIN}` });
  const status = await new Promise<number>((resolve, reject) => {
    session.on('error', reject);
    const req = session.request({ ':path': '/health' });
    req.on('response', (h) => resolve(Number(h[':status'])));
    req.on('error', reject);
    req.end();
  });
  expect(session.alpnProtocol).toBe('h2');
  session.close();
  expect(status).toBe(204);
  const { stdout } = await promisify(execFile)('curl', [
    '-s',
    '--http1.1',
    '--cacert',
    certs.caPath,
    '--resolve',
    `api.${DOMAIN}:443:${EDGE}`,
    '-o',
    '/dev/null',
    '-w',
    '%{http_version} %{http_code}',
    `https://api.${DOMAIN}/health`,
  ]);
  expect(stdout).toBe('1.1 204');
}

describe('a stand-alone node with TLS', () => {
  let certs: TestCerts;
  let node: Proc;

  beforeAll(async () => {
    certs = makeWildcardCerts(DOMAIN);
    node = await startNode({
      name: 'tls',
      addr: `${EDGE}:443`,
      hostRange: '10.119.192.0/18',
      env: { AENV_TLS_CERT: certs.certPath, AENV_TLS_KEY: certs.keyPath },
      health: { url: `https://${EDGE}/health`, ca: certs.ca, servername: `api.${DOMAIN}` },
    });
  });

  afterAll(async () => {
    await node?.stop();
    removeCgroups('aenv-h9');
    if (certs) rmSync(certs.dir, { recursive: true, force: true });
  });

  it('offers HTTP/2 by ALPN and HTTP/1.1 to clients that ask for it', async () => {
    await expectAlpn(certs);
  });

  it('serves the E2B SDK at https://49983-{id}.{domain} and a private getHost() URL: HTTP/1.1, HTTP/2, SSE, WebSocket, resume on traffic', async () => {
    expectServedOverTls(await runTlsClient(certs));
  });
});

describe('the gateway with TLS in front of a cluster', () => {
  let certs: TestCerts;
  let c: TestCluster;

  beforeAll(async () => {
    certs = makeWildcardCerts(DOMAIN);
    c = await TestCluster.start({
      nodes: 1,
      store: 'memory',
      gatewayAddr: `${EDGE}:443`,
      gatewayEnv: { AENV_TLS_CERT: certs.certPath, AENV_TLS_KEY: certs.keyPath },
      gatewayHealth: { url: `https://${EDGE}/health`, ca: certs.ca, servername: `api.${DOMAIN}` },
    });
  });

  afterAll(async () => {
    await c?.stop();
    if (certs) rmSync(certs.dir, { recursive: true, force: true });
  });

  it('offers HTTP/2 by ALPN and HTTP/1.1 to clients that ask for it', async () => {
    await expectAlpn(certs);
  });

  it('serves the SDK and private getHost() URLs at https://{port}-{id}.{domain} through the gateway: HTTP/1.1, HTTP/2, SSE, WebSocket, resume on traffic', async () => {
    expectServedOverTls(await runTlsClient(certs));
  });
});
