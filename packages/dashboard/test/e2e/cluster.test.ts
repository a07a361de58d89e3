import { createServer, type Server } from 'node:http';
import { rmSync } from 'node:fs';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterDashboardHandler, type ClusterNode } from '../../src/server/index.js';
import {
  API_KEY,
  cleanSandboxes,
  startServer,
  TEST_HOME,
  urlOf,
  useSdkEnv,
  useTestServer,
  type TestServer,
} from '@agentenv/test-support/server';
import { haveChromium, launchBrowser, screenshot, type TestBrowser } from './browser.js';

/** Helper 5's port range (19500–19599): the stand-in gateway in front of the two test nodes. */
const FRONT_PORT = 19500;
const SECOND = 1;
const NODES: ClusterNode[] = [
  { nodeID: 'node-a', url: urlOf(0) },
  { nodeID: 'node-b', url: urlOf(SECOND) },
];

const getJson = async (base: string, path: string) =>
  (await fetch(`${base}${path}`, { headers: { 'x-api-key': API_KEY } })).json() as Promise<unknown>;

/**
 * What the dashboard must show against any cluster entry point `base` (a gateway's URL, or
 * the stand-in below): every node of GET /nodes, counts that add up, and SDK sandboxes created
 * on each node appearing without a reload.
 */
async function clusterChecks(
  browser: TestBrowser,
  base: string,
  create: (i: number) => Promise<Sandbox>,
  label: string,
) {
  const { page, errors } = await browser.page('desktop');
  await page.addInitScript((key) => sessionStorage.setItem('aenv.apiKey', key), API_KEY);
  await page.goto(`${base}/dashboard/#/nodes`);
  const nodes = (await getJson(base, '/nodes')) as Record<string, unknown>[];
  expect(nodes.length).toBeGreaterThanOrEqual(2);
  await expect.poll(() => page.locator('article.node').count()).toBe(nodes.length);

  const made = [await create(0), await create(1)];
  try {
    await page.goto(`${base}/dashboard/#/sandboxes`);
    for (const s of made) await page.locator(`tr[data-sandbox="${s.sandboxId}"]`).waitFor({ timeout: 5000 });
    const shownNodes = await Promise.all(
      made.map((s) => page.locator(`tr[data-sandbox="${s.sandboxId}"] td.wide`).first().textContent()),
    );
    expect(new Set(shownNodes).size).toBe(2);
    await screenshot(page, `${label}-sandboxes-desktop`);

    await page.getByRole('link', { name: 'Overview' }).click();
    const summary = (await getJson(base, '/dashboard/api/summary')) as {
      counts: Record<string, number>;
      nodeIDs: string[];
    };
    expect(summary.nodeIDs.length).toBe(nodes.length);
    await expect
      .poll(() => page.locator('.card[data-state="running"] .count').textContent())
      .toBe(String(summary.counts.running));
    await page.getByRole('link', { name: 'Nodes' }).click();
    await page.locator('article.node').nth(1).waitFor();
    await screenshot(page, `${label}-nodes-desktop`);
  } finally {
    await Promise.all(made.map((s) => s.kill().catch(() => undefined)));
  }
  expect(errors).toEqual([]);
  await page.close();
}

describe.skipIf(!haveChromium)('the dashboard over two real nodes, merged by its cluster handler', () => {
  useTestServer({ AENV_NODE_ID: 'node-a' });
  let second: TestServer;
  let front: Server;
  let browser: TestBrowser;
  const frontUrl = `http://127.0.0.1:${FRONT_PORT}`;

  beforeAll(async () => {
    second = await startServer({ AENV_NODE_ID: 'node-b' }, SECOND);
    const dashboard = clusterDashboardHandler({
      nodes: async () => NODES,
      authorize: (req) => {
        if (req.headers['x-api-key'] !== API_KEY) throw new Error('invalid API key');
      },
    });
    // Stands in for the gateway's own GET /nodes (every node's, together); the rest is the handler's.
    front = createServer((req, res) => {
      if (dashboard(req, res)) return;
      if (req.url === '/nodes' && req.headers['x-api-key'] === API_KEY) {
        void Promise.all(NODES.map((n) => getJson(n.url, '/nodes'))).then((all) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(all.flat()));
        });
        return;
      }
      res.writeHead(req.headers['x-api-key'] === API_KEY ? 404 : 401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 404, message: 'not here' }));
    });
    await new Promise<void>((resolve) => front.listen(FRONT_PORT, '127.0.0.1', resolve));
    browser = await launchBrowser();
    const warm = await Sandbox.create({ timeoutMs: 60_000 });
    await warm.kill();
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => front?.close(resolve));
    useSdkEnv(urlOf(SECOND));
    await cleanSandboxes().catch(() => undefined);
    useSdkEnv();
    await second?.stop();
    for (const d of ['state', 'captures', 'snapshot-store', 'snapshot-cache'])
      rmSync(`${TEST_HOME}/instances/${SECOND}/${d}`, { recursive: true, force: true });
  });

  it('shows both nodes, their sandboxes live, and counts that add up', async () => {
    await clusterChecks(
      browser,
      frontUrl,
      (i) =>
        Sandbox.create({
          apiUrl: NODES[i]!.url,
          sandboxUrl: NODES[i]!.url,
          metadata: { suite: 'dashboard-cluster' },
        }),
      'cluster',
    );
  });

  it('refuses a wrong key on the merged routes as a node does', async () => {
    const r = await fetch(`${frontUrl}/dashboard/api/summary`, { headers: { 'x-api-key': 'e2b_wrong' } });
    expect(r.status).toBe(401);
    expect(((await r.json()) as { message: string }).message).toMatch(/invalid API key/);
  });
});

/**
 * The local cluster (scheduler, gateway, nodes) from the deployment recipes: set
 * AENV_TEST_GATEWAY_URL to its gateway, which serves the dashboard with clusterDashboardHandler.
 */
const GATEWAY = process.env.AENV_TEST_GATEWAY_URL;
describe.skipIf(!haveChromium || !GATEWAY)(
  'the dashboard against a running local cluster (AENV_TEST_GATEWAY_URL)',
  () => {
    let browser: TestBrowser;
    beforeAll(async () => {
      browser = await launchBrowser();
    });
    afterAll(async () => browser?.close());

    it('shows every node, their sandboxes live, and counts that add up', async () => {
      await clusterChecks(
        browser,
        GATEWAY!,
        () =>
          Sandbox.create({
            apiUrl: GATEWAY!,
            sandboxUrl: GATEWAY!,
            apiKey: API_KEY,
            metadata: { suite: 'dashboard-gateway' },
          }),
        'gateway',
      );
    });
  },
);
