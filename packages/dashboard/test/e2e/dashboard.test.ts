import { Sandbox } from 'e2b';
import type { Page, Response } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import {
  api,
  API_KEY,
  seedPausedRecords,
  TEST_HOME,
  URL_BASE,
  useTestServer,
} from '@agentenv/test-support/server';
import {
  haveChromium,
  launchBrowser,
  screenshot,
  VIEWPORTS,
  type TestBrowser,
  type TrackedPage,
} from './browser.js';

const DASHBOARD = `${URL_BASE}/dashboard/`;

async function signIn(page: Page, key = API_KEY): Promise<void> {
  await page.goto(DASHBOARD);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** A tab already signed in: the key is put in session storage before the app loads. */
async function signedInPage(
  b: TestBrowser,
  viewport: keyof typeof VIEWPORTS,
  hash = '',
): Promise<TrackedPage> {
  const t = await b.page(viewport);
  await t.page.addInitScript((key) => sessionStorage.setItem('aenv.apiKey', key), API_KEY);
  await t.page.goto(`${DASHBOARD}${hash}`);
  await t.page.getByTestId('live').filter({ hasText: 'live' }).waitFor();
  return t;
}

const stateOf = async (id: string) =>
  (await api('GET', `/sandboxes/${id}`)).json?.state as string | undefined;

describe.skipIf(!haveChromium)('the dashboard in chromium against a real node', () => {
  useTestServer();
  let browser: TestBrowser;
  /** Console and page errors of every tab that is expected to have none. */
  const clean: TrackedPage[] = [];

  beforeAll(async () => {
    // The first create waits for the base template (built once per machine).
    const warm = await Sandbox.create({ timeoutMs: 60_000 });
    await warm.kill();
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('serves its pages with a strict Content-Security-Policy and without a key', async () => {
    const r = await fetch(DASHBOARD);
    expect(r.status).toBe(200);
    const csp = r.headers.get('content-security-policy') ?? '';
    expect(csp).toMatch(/default-src 'none'/);
    expect(csp).toMatch(/script-src 'self'(;|$)/);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    const html = await r.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|style=/);
    // Its data routes want the key like every other API route.
    expect((await fetch(`${URL_BASE}/dashboard/api/summary`)).status).toBe(401);
    // Bad input is a 400 with {code, message}, as on every route.
    const bad = await api('GET', '/dashboard/api/sandboxes?limit=1000&state=Running');
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ code: 400, message: expect.any(String) });
    expect((await api('GET', '/sandboxes/nosuchsandbox/events')).status).toBe(404);
  });

  it('a wrong key shows a clear error and does not sign in', async () => {
    const { page } = await browser.page();
    await signIn(page, 'e2b_wrong');
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/invalid API key/);
    expect(await page.evaluate(() => sessionStorage.getItem('aenv.apiKey'))).toBeNull();
    await screenshot(page, 'login-wrong-key-desktop');
    await page.close();
  });

  it('signs in with the key and opens the live overview', async () => {
    const t = await browser.page();
    clean.push(t);
    await signIn(t.page);
    await t.page.getByRole('heading', { name: 'Overview' }).waitFor();
    await t.page.getByTestId('live').filter({ hasText: 'live' }).waitFor();
    expect(await t.page.evaluate(() => sessionStorage.getItem('aenv.apiKey'))).toBe(API_KEY);
    await t.page.close();
  });

  it('shows a new SDK sandbox within 2 s without a reload, pauses it from the UI, and asks before a kill', async () => {
    const t = await signedInPage(browser, 'desktop', '#/sandboxes');
    clean.push(t);
    const { page } = t;
    const sbx = await Sandbox.create({ metadata: { suite: 'dashboard' } });
    const created = Date.now();
    try {
      await page.locator(`tr[data-sandbox="${sbx.sandboxId}"]`).waitFor({ timeout: 2000 });
      console.log(`new sandbox in the table ${Date.now() - created} ms after the SDK's create returned`);
      await page.locator(`tr[data-sandbox="${sbx.sandboxId}"][data-state="running"]`).waitFor();

      // The overview's numbers are the API's.
      await page.getByRole('link', { name: 'Overview' }).click();
      const running = (await api('GET', '/v2/sandboxes?state=running')).json.length;
      const node = (await api('GET', '/nodes')).json[0] as {
        sandboxCount: number;
        pausedSandboxCount: number;
      };
      expect(running).toBe(node.sandboxCount);
      await expect
        .poll(() => page.locator('.card[data-state="running"] .count').textContent())
        .toBe(String(running));
      await expect
        .poll(() => page.locator('.card[data-state="paused"] .count').textContent())
        .toBe(String(node.pausedSandboxCount));
      await page
        .locator('[data-stage="create"]')
        .filter({ hasText: /p50 \d/ })
        .waitFor();

      // Pause from the table: the API sees it paused.
      await page.getByRole('link', { name: 'Sandboxes' }).click();
      const row = page.locator(`tr[data-sandbox="${sbx.sandboxId}"]`);
      await row.getByRole('button', { name: 'Pause' }).click();
      await eventually(async () => expect(await stateOf(sbx.sandboxId)).toBe('paused'), {
        timeoutMs: 60_000,
      });
      await page.locator(`tr[data-sandbox="${sbx.sandboxId}"][data-state="paused"]`).waitFor();

      // Resume it from its page, snapshot it twice (a chain), then kill: cancel first, then confirm.
      await row.getByRole('link', { name: sbx.sandboxId }).click();
      await page.getByRole('button', { name: 'Resume' }).click();
      await eventually(async () => expect(await stateOf(sbx.sandboxId)).toBe('running'), {
        timeoutMs: 60_000,
      });
      await page.getByTestId('detail-state').filter({ hasText: 'running' }).waitFor();
      for (const name of ['dash-one', 'dash-two']) {
        await page.getByLabel('snapshot name (optional)').fill(name);
        await page.getByRole('button', { name: 'Snapshot' }).click();
        await eventually(
          async () => expect((await api('GET', `/snapshots?name=${name}`)).json ?? []).toHaveLength(1),
          { timeoutMs: 60_000 },
        );
        await page.getByRole('button', { name: 'Snapshot' }).and(page.locator(':enabled')).waitFor();
      }
      await page.locator('[aria-label="Lifecycle events"] .ev-paused').waitFor();
      await page.locator('[aria-label="Logs"]').filter({ hasText: 'paused' }).waitFor();
      for (const [name, size] of Object.entries(VIEWPORTS)) {
        await page.setViewportSize(size);
        await screenshot(page, `sandbox-detail-${name}`);
      }
      await page.setViewportSize(VIEWPORTS.desktop);

      await page.getByRole('button', { name: 'Kill' }).click();
      const dialog = page.getByRole('dialog', { name: 'Kill this sandbox?' });
      await dialog.waitFor();
      await screenshot(page, 'kill-confirmation-desktop');
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      await dialog.waitFor({ state: 'hidden' });
      expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(200);
      await page.getByRole('button', { name: 'Kill' }).click();
      await dialog.getByRole('button', { name: 'Kill' }).click();
      await eventually(
        async () => expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(404),
        {
          timeoutMs: 60_000,
        },
      );
      await page.getByRole('heading', { name: 'Sandboxes' }).waitFor();
    } finally {
      await sbx.kill().catch(() => undefined);
    }
  });

  it("follows a template build's log while it builds, until it is ready", async () => {
    const t = await signedInPage(browser, 'desktop');
    clean.push(t);
    const { page } = t;
    const reg = await api('POST', '/v3/templates', { name: 'dash-tpl' });
    expect(reg.status).toBe(202);
    const { templateID, buildID } = reg.json as unknown as { templateID: string; buildID: string };
    await page.goto(`${DASHBOARD}#/templates/${templateID}`);
    await page.locator('.build-log .badge').filter({ hasText: 'waiting' }).waitFor();
    const trigger = await api('POST', `/v2/templates/${templateID}/builds/${buildID}`, {
      fromTemplate: 'base',
      steps: [{ type: 'RUN', args: ['for i in 1 2 3; do echo dash-step-$i; sleep 1; done'], force: false }],
    });
    expect(trigger.status).toBe(202);
    const log = page.getByLabel('Build log');
    await log.filter({ hasText: 'dash-step-1' }).waitFor({ timeout: 120_000 });
    const statusWhenFirstLine = await page.locator('.build-log h3 .badge').textContent();
    await page.locator('.build-log h3 .badge').filter({ hasText: 'ready' }).waitFor({ timeout: 120_000 });
    await log.filter({ hasText: 'dash-step-3' }).waitFor();
    // The first line was shown while the build still ran: the log is followed, not read at the end.
    expect(statusWhenFirstLine).toBe('building');
    await screenshot(page, 'template-build-desktop');
  });

  it('renders every view at 1280×800 and 390×844, shows no secret, and logs no error', async () => {
    const sbx = await Sandbox.create({ metadata: { suite: 'dashboard', owner: 'screenshots' } });
    const token = (await api('GET', `/sandboxes/${sbx.sandboxId}`)).json.envdAccessToken as string;
    expect(token).toBeTruthy();
    try {
      for (const viewport of Object.keys(VIEWPORTS) as (keyof typeof VIEWPORTS)[]) {
        const t = await signedInPage(browser, viewport);
        clean.push(t);
        const { page } = t;
        const views: [string, string, string][] = [
          ['overview', '#/', 'Overview'],
          ['nodes', '#/nodes', 'Nodes'],
          ['sandboxes', '#/sandboxes', 'Sandboxes'],
          ['sandbox-detail', `#/sandboxes/${sbx.sandboxId}`, sbx.sandboxId],
          ['catalog', '#/catalog', 'Snapshots and templates'],
        ];
        for (const [name, hash, heading] of views) {
          await page.goto(`${DASHBOARD}${hash}`);
          await page.getByRole('heading', { name: heading }).first().waitFor();
          if (name === 'nodes') await page.locator('article.node').first().waitFor();
          if (name === 'sandboxes') await page.locator(`tr[data-sandbox="${sbx.sandboxId}"]`).waitFor();
          if (name === 'sandbox-detail')
            // Two points of the sandbox's own metrics have come over its stream.
            await page.waitForFunction(
              () => Number(document.querySelector<HTMLElement>('figure.chart')?.dataset.points) >= 2,
            );
          if (name === 'catalog') {
            await page.locator('[data-snapshot]').first().waitFor();
            await page.getByRole('cell', { name: 'dash-tpl' }).waitFor();
          }
          await screenshot(page, `${name}-${viewport}`);
          const html = await page.content();
          expect(html).not.toContain(API_KEY);
          expect(html).not.toContain(token);
          // Nothing wider than the screen except inside the tables' own scroll boxes.
          const overflow = await page.evaluate(
            () => document.documentElement.scrollWidth - window.innerWidth,
          );
          expect(overflow, `${name} at ${viewport} is wider than the viewport`).toBeLessThanOrEqual(0);
        }
        await page.close();
      }
    } finally {
      await sbx.kill();
    }
    expect(clean.flatMap((t) => t.errors)).toEqual([]);
  });
});

describe.skipIf(!haveChromium)('the dashboard on a node with 500 sandbox records', () => {
  useTestServer();
  let browser: TestBrowser;
  let seeded: ReturnType<typeof seedPausedRecords>;

  beforeAll(async () => {
    seeded = seedPausedRecords(`${TEST_HOME}/state/sandboxes.db`, 500);
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    seeded?.remove();
  });

  it('shows the sandboxes of a 500-record node one server-side page of 25 at a time', async () => {
    const all = await api('GET', '/dashboard/api/sandboxes?limit=25');
    expect(all.json.total).toBe(500);
    expect(all.json.items).toHaveLength(25);

    const t = await browser.page('desktop');
    await t.page.addInitScript((key) => sessionStorage.setItem('aenv.apiKey', key), API_KEY);
    // Read while the page is open. The page refreshes the list on its own, so a read may still
    // be under way when the page closes: that one rejects, and only the ones awaited below count.
    const pageSizes: Promise<number>[] = [];
    const onResponse = (r: Response) => {
      if (!r.url().includes('/dashboard/api/sandboxes?')) return;
      const size = r.json().then((b: { items: unknown[] }) => b.items.length);
      size.catch(() => undefined);
      pageSizes.push(size);
    };
    t.page.on('response', onResponse);
    await t.page.goto(`${DASHBOARD}#/sandboxes?state=paused`);
    await t.page.locator('tr[data-sandbox]').nth(24).waitFor();
    const timing = await t.page.evaluate(() => ({
      firstPaint: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN,
      rows: performance.now(),
    }));
    console.log(
      `500 records: first contentful paint ${timing.firstPaint.toFixed(0)} ms, 25 rows shown ${timing.rows.toFixed(0)} ms after navigation`,
    );
    expect(await t.page.getByTestId('page-range').textContent()).toBe('1–25 of 500');
    await t.page.getByRole('button', { name: 'Older →' }).click();
    await t.page.getByTestId('page-range').filter({ hasText: '26–50 of 500' }).waitFor();
    t.page.off('response', onResponse);
    expect(pageSizes.length).toBeGreaterThan(0);
    expect((await Promise.all(pageSizes)).every((n) => n <= 25)).toBe(true);
    await screenshot(t.page, 'sandboxes-500-desktop');
    expect(t.errors).toEqual([]);
  });
});
