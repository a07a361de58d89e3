import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LifecycleActivity } from '@agentenv/dashboard';
import { pathVariants, probe } from '@agentenv/test-support';
import { FAKE_API_KEY, FakeNode, fakeApp, type FakeApp } from '@agentenv/test-support/fakes';

/**
 * Every route of the node's router × {no key, wrong key, the key twice, right key}, under the
 * spellings of its path that get past a check on the raw URL, sent on a real socket as they are
 * (no client normalisation). The routes come from the router itself, so a new one is in the table.
 */
let app: FakeApp;
let port: number;
let close: () => Promise<void>;

beforeAll(async () => {
  const node = new FakeNode();
  ({ app, close } = await fakeApp(node, { dashboardActivity: new LifecycleActivity('n1') }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as AddressInfo).port;
});
afterAll(() => close?.());

const KEYS: Record<string, string | string[] | undefined> = {
  none: undefined,
  wrong: 'e2b_not-the-key-000000',
  // The right key in two headers is no key: a proxy in front may have added one of them.
  twice: [FAKE_API_KEY, FAKE_API_KEY],
  right: FAKE_API_KEY,
};

/** A concrete path for a route pattern: parameters and wildcards get sample values. */
const concrete = (url: string) => url.replace(/:[A-Za-z]+/g, 'abc123').replace(/\*$/, 'x');

const PUBLIC = [
  'GET /health',
  'GET /metrics',
  'GET /openapi.json',
  'GET /dashboard',
  'GET /dashboard/*',
  'HEAD /health',
  'HEAD /metrics',
  'HEAD /openapi.json',
  'HEAD /dashboard',
  'HEAD /dashboard/*',
];

/**
 * The status of one request; with the right key, a stream that keeps its headers back (HEAD of
 * an event stream) is past the gate, which is all that is asked of it here.
 */
async function answer(method: string, path: string, key: string | string[] | undefined) {
  const headers = key ? { 'x-api-key': key } : {};
  try {
    return await probe(port, { method, path, headers, timeoutMs: key === FAKE_API_KEY ? 500 : 10_000 });
  } catch (err) {
    if (key === FAKE_API_KEY && /no answer/.test(String(err))) return { status: 0, body: '' };
    throw err;
  }
}

describe('the node authenticates on the route it matched', () => {
  it('lists every route with its access, public only where meant', () => {
    const routes = app.routeAccess;
    expect(routes.length).toBeGreaterThan(40);
    const open = routes
      .filter((r) => r.auth === 'public' && !r.url.startsWith('/volumecontent/'))
      .map((r) => `${r.method} ${r.url}`);
    expect(open.sort()).toEqual([...PUBLIC].sort());
    expect(routes.filter((r) => r.url.startsWith('/volumecontent/')).every((r) => r.auth === 'public')).toBe(
      true,
    );
    expect(routes.find((r) => r.url === '/dashboard/api/sandboxes')?.auth).toBe('key');
  });

  it('answers every route × key × spelling as its access says', { timeout: 120_000 }, async () => {
    // One route at a time, its spellings × keys at once.
    const failures: string[] = [];
    for (const route of app.routeAccess) {
      const cases = pathVariants(concrete(route.url)).flatMap((v) =>
        Object.entries(KEYS).map(([keyName, key]) => ({ v, keyName, key })),
      );
      await Promise.all(
        cases.map(async ({ v, keyName, key }) => {
          const r = await answer(route.method, v.path, key);
          const what = `${route.method} ${v.path} (${v.name}, ${keyName} key) → ${r.status}`;
          if (key === FAKE_API_KEY) {
            if (r.status === 401) failures.push(what);
          } else if (route.auth === 'key' && v.sameRoute) {
            if (r.status !== 401) failures.push(what);
          } else if (r.status >= 500 || (route.auth === 'key' && r.status < 400)) failures.push(what);
        }),
      );
    }
    expect(failures).toEqual([]);
  });

  it('answers the dashboard API only with the key, however its path is spelled', async () => {
    for (const path of [
      '/dashboard/%61pi/sandboxes',
      '/dashboard/%61pi/stream',
      '/dashboard/api/nope',
      '/nowhere',
    ]) {
      expect((await probe(port, { method: 'GET', path })).status, path).toBe(401);
    }
    const page = await probe(port, {
      method: 'GET',
      path: '/dashboard/%61pi/sandboxes',
      headers: { 'x-api-key': FAKE_API_KEY },
    });
    expect(page.status).toBe(200);
    expect(JSON.parse(page.body)).toMatchObject({ items: [] });
  });
});
