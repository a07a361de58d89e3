import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The test cluster of the gateway's suite: redis-less scheduler, aenv-gateway and aenv-server
// nodes (ports 199xx, home /var/lib/aenv-h9), the same processes a deployment runs.
import { TEST_CLUSTER_KEY as API_KEY, TestCluster } from '@agentenv/test-support/cluster';
import { haveChromium, launchBrowser, screenshot, type TestBrowser } from './browser.js';

const getJson = async (base: string, path: string) =>
  (await fetch(`${base}${path}`, { headers: { 'x-api-key': API_KEY } })).json() as Promise<unknown>;

describe.skipIf(!haveChromium)('the dashboard at a real gateway over two real nodes', () => {
  let c: TestCluster;
  let browser: TestBrowser;
  let base: string;

  beforeAll(async () => {
    c = await TestCluster.start({ nodes: 2, store: 'memory' });
    base = c.gatewayUrl;
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await c?.stop();
  });

  /** Created on node `i` itself, so both nodes hold one whatever the placement would choose. */
  const createOn = (i: number) =>
    Sandbox.create({
      apiUrl: c.nodeUrl(i),
      sandboxUrl: c.nodeUrl(i),
      apiKey: API_KEY,
      metadata: { suite: 'dashboard-gateway' },
    });

  it('serves its pages at the cluster address with a strict CSP, and its data with the key', async () => {
    const r = await fetch(`${base}/dashboard/`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-security-policy') ?? '').toMatch(/default-src 'none'/);
    expect(await r.text()).toMatch(/<script type="module"[^>]*src="\/dashboard\/assets\//);
    const wrong = await fetch(`${base}/dashboard/api/summary`, { headers: { 'x-api-key': 'e2b_wrong' } });
    expect(wrong.status).toBe(401);
    expect((await wrong.json()) as { message: string }).toMatchObject({ message: expect.any(String) });
    const bad = await fetch(`${base}/dashboard/api/sandboxes?limit=1000`, {
      headers: { 'x-api-key': API_KEY },
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: 400, message: expect.any(String) });
  });

  it('shows both nodes, their sandboxes live, counts that add up, and the cluster lifecycle', async () => {
    const { page, errors } = await browser.page('desktop');
    await page.addInitScript((key) => sessionStorage.setItem('aenv.apiKey', key), API_KEY);
    await page.goto(`${base}/dashboard/#/nodes`);
    const nodes = (await getJson(base, '/nodes')) as Record<string, unknown>[];
    expect(nodes.length).toBe(2);
    await expect.poll(() => page.locator('article.node').count()).toBe(2);

    await page.goto(`${base}/dashboard/#/sandboxes`);
    await page.getByRole('heading', { name: 'Sandboxes' }).waitFor();
    const made = [await createOn(0), await createOn(1)];
    try {
      // No reload: the table follows the cluster's event stream.
      for (const s of made)
        await page.locator(`tr[data-sandbox="${s.sandboxId}"]`).waitFor({ timeout: 5000 });
      const shownNodes = await Promise.all(
        made.map((s) => page.locator(`tr[data-sandbox="${s.sandboxId}"] td.wide`).first().textContent()),
      );
      expect(new Set(shownNodes).size).toBe(2);
      await screenshot(page, 'gateway-sandboxes-desktop');

      await page.getByRole('link', { name: 'Overview' }).click();
      const summary = (await getJson(base, '/dashboard/api/summary')) as {
        counts: Record<string, number>;
        nodeIDs: string[];
      };
      expect(summary.nodeIDs.length).toBe(2);
      expect(summary.counts.running).toBeGreaterThanOrEqual(2);
      await expect
        .poll(() => page.locator('.card[data-state="running"] .count').textContent())
        .toBe(String(summary.counts.running));
      await page.getByRole('link', { name: 'Nodes' }).click();
      await page.locator('article.node').nth(1).waitFor();
      await screenshot(page, 'gateway-nodes-desktop');

      // The detail page reads the sandbox through the gateway and its events from the scheduler.
      // Made on its node directly, a sandbox is routed by the gateway once a heartbeat of that
      // node has listed it (every 2 s), and its lifecycle events may be there before that.
      const routed = async () =>
        (await fetch(`${base}/sandboxes/${made[1]!.sandboxId}`, { headers: { 'x-api-key': API_KEY } }))
          .status;
      await expect.poll(routed, { timeout: 10_000 }).toBe(200);
      await page.goto(`${base}/dashboard/#/sandboxes/${made[1]!.sandboxId}`);
      await page.locator('[aria-label="Lifecycle events"] .ev-created').waitFor();
      await screenshot(page, 'gateway-sandbox-detail-desktop');
    } finally {
      // Closed first: a page still polling a sandbox as it is killed would log the 404s it gets.
      await page.close();
      await Promise.all(made.map((s) => s.kill().catch(() => undefined)));
    }
    expect(errors).toEqual([]);
  });
});
