import { connect } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pathVariants, probe } from '@agentenv/test-support';
import { loadGatewayConfig } from '../../src/config.js';
import { startGateway, type RunningGateway } from '../../src/gateway.js';
import { classify, ROUTE_ACCESS, type ControlRoute } from '../../src/routing/classify.js';
import type { Scheduler } from '../../src/scheduler/scheduler.js';

const KEY = 'gw-test-key-0123456789';
const KEYS = { none: undefined, wrong: 'gw-wrong-key-000000000', right: KEY } as const;

/** A cluster with no node: what a request gets past the gate is the gateway's own refusal. */
const emptyScheduler: Scheduler = {
  schedule: async () => {
    throw new Error('no placement in this test');
  },
  lookupNode: async () => undefined,
  recordAssignment: async () => undefined,
  releaseReservation: async () => undefined,
  recordSnapshot: async () => undefined,
  recordPause: async () => undefined,
  listNodes: async () => [],
  getNode: async () => undefined,
  sandboxEvents: async () => [],
  watchEvents: async function* () {},
};

/** One request per route kind of the gateway's router; the test below proves the list whole. */
const SAMPLES: [string, string, ControlRoute['kind']][] = [
  ['GET', '/health', 'health'],
  ['GET', '/metrics', 'metrics'],
  ['GET', '/nodes', 'nodes'],
  ['GET', '/nodes/n1', 'node'],
  ['GET', '/events', 'events'],
  ['GET', '/sandboxes/abc123/events', 'sandbox-events'],
  ['POST', '/sandboxes', 'create'],
  ['POST', '/sandboxes-cold', 'create'],
  ['GET', '/v2/sandboxes', 'list'],
  ['POST', '/sandboxes/abc123/fork', 'fork'],
  ['POST', '/sandboxes/abc123/connect', 'resume'],
  ['POST', '/sandboxes/abc123/snapshots', 'snapshot'],
  ['POST', '/sandboxes/abc123/pause', 'pause'],
  ['DELETE', '/sandboxes/abc123', 'sandbox'],
  ['POST', '/v3/templates', 'template'],
  ['GET', '/templates/t1/builds/b1/status', 'template'],
  ['GET', '/volumes', 'volumes'],
  ['DELETE', '/volumes/vol1', 'volume'],
  ['GET', '/volumecontent/vol1/dir?path=/', 'volume-content'],
  ['GET', '/templates', 'any-node'],
  ['GET', '/nowhere', 'any-node'],
];
/** The dashboard's own routes on a gateway: its pages are public, its API is not. */
const DASHBOARD: [string, 'public' | 'key'][] = [
  ['/dashboard/', 'public'],
  ['/dashboard/index.html', 'public'],
  ['/dashboard/api/summary', 'key'],
  ['/dashboard/api/sandboxes', 'key'],
  ['/dashboard/api/catalog', 'key'],
  ['/dashboard/api/stream', 'key'],
  ['/dashboard/api/nope', 'key'],
];

let gw: RunningGateway;
let port: number;

beforeAll(async () => {
  const config = loadGatewayConfig({
    AENV_API_KEY: KEY,
    GATEWAY_ADDR: '127.0.0.1:0',
    GATEWAY_NODE_TIMEOUT_MS: '2000',
  });
  gw = await startGateway(config, emptyScheduler, pino({ level: 'silent' }));
  port = Number(new URL(gw.url).port);
});
afterAll(() => gw?.close());

/** A status; with the right key, an answer still under way after 500 ms is past the gate. */
async function answer(method: string, path: string, key: string | undefined) {
  try {
    return await probe(port, {
      method,
      path,
      headers: key ? { 'x-api-key': key } : {},
      timeoutMs: key === KEY ? 500 : 10_000,
    });
  } catch (err) {
    if (key === KEY && /no answer/.test(String(err))) return { status: 0, body: '' };
    throw err;
  }
}

async function table(routes: [string, string, 'public' | 'key'][]): Promise<string[]> {
  const failures: string[] = [];
  for (const [method, path, access] of routes) {
    const cases = pathVariants(path).flatMap((v) =>
      Object.entries(KEYS).map(([name, key]) => ({ v, name, key })),
    );
    await Promise.all(
      cases.map(async ({ v, name, key }) => {
        const r = await answer(method, v.path, key);
        const what = `${method} ${v.path} (${v.name}, ${name} key) → ${r.status} ${r.body.slice(0, 80)}`;
        if (key === KEY) {
          if (r.status === 401) failures.push(what);
        } else if (access === 'key' && v.sameRoute) {
          if (r.status !== 401) failures.push(what);
        } else if (r.status >= 500 || (access === 'key' && r.status < 400)) failures.push(what);
      }),
    );
  }
  return failures;
}

describe('the gateway authenticates on the route it matched', () => {
  it('has a sample of every route kind, classified as that kind', () => {
    expect(new Set(SAMPLES.map(([, , kind]) => kind))).toEqual(new Set(Object.keys(ROUTE_ACCESS)));
    for (const [method, path, kind] of SAMPLES) expect(classify(method, path).kind, path).toBe(kind);
    expect(
      Object.entries(ROUTE_ACCESS)
        .filter(([, a]) => a === 'public')
        .map(([k]) => k),
    ).toEqual(['health', 'metrics', 'volume-content']);
  });

  it('answers every route × key × spelling as its access says', { timeout: 60_000 }, async () => {
    const routes = [
      ...SAMPLES.map(([m, p, kind]): [string, string, 'public' | 'key'] => [m, p, ROUTE_ACCESS[kind]]),
      ...DASHBOARD.map(([p, access]): [string, string, 'public' | 'key'] => ['GET', p, access]),
    ];
    expect(await table(routes)).toEqual([]);
  });

  it('answers malformed targets with a 400 and keeps serving', async () => {
    for (const path of ['//', '/%E0', '/nodes/%E0', '/a%zz', '/x%00', '/dashboard/api//x', '*'])
      expect((await probe(port, { method: 'GET', path })).status, path).toBeLessThan(500);
    const raw = await new Promise<string>((resolve) => {
      const s = connect(port, '127.0.0.1', () => s.end('GET http://x/health HTTP/1.1\r\nhost: x\r\n\r\n'));
      let got = '';
      s.on('data', (d) => (got += d));
      s.on('close', () => resolve(got));
    });
    expect(raw).toMatch(/^HTTP\/1.1 204/);
    expect((await probe(port, { method: 'GET', path: '/health' })).status).toBe(204);
  });
});
