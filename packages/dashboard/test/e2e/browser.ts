import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's chromium (scripts/setup.sh installs it); nothing downloads a browser of its own. */
export const CHROMIUM = '/usr/bin/chromium';
export const haveChromium = existsSync(CHROMIUM);

/** Screenshots land here (git-ignored), one per view and viewport. */
export const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));

export const VIEWPORTS = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const;

export interface TestBrowser {
  context: BrowserContext;
  /** A new tab whose console errors, page errors and CSP violations are collected. */
  page(viewport?: keyof typeof VIEWPORTS): Promise<TrackedPage>;
  close(): Promise<void>;
}

export interface TrackedPage {
  page: Page;
  /** Everything the page reported as an error, in order. */
  errors: string[];
}

/** Headless chromium with a fresh profile, no network of its own beyond the pages it is sent to. */
export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(path.join(tmpdir(), 'aenv-dashboard-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
    viewport: VIEWPORTS.desktop,
  });
  // The persistent context opens with one blank tab; tests use their own.
  for (const p of context.pages()) await p.close();
  return {
    context,
    async page(viewport = 'desktop') {
      const page = await context.newPage();
      await page.setViewportSize(VIEWPORTS[viewport]);
      const errors: string[] = [];
      page.on('console', (m) => {
        // A failed load names only its status in the text; the URL is in the location.
        if (m.type() === 'error') errors.push(`console: ${m.text()} (${m.location().url})`);
      });
      page.on('pageerror', (e) => errors.push(`page: ${e.message}`));
      return { page, errors };
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  // A full-page capture of a scrolled page would paint the sticky header mid-page.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: file, fullPage: true });
  return file;
}
