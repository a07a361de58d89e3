import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CONTENT_SECURITY_POLICY, DashboardAssets, isDashboardPage } from '../../src/server/assets.js';

const dir = mkdtempSync(path.join(tmpdir(), 'aenv-dash-'));
mkdirSync(path.join(dir, 'assets'));
writeFileSync(path.join(dir, 'index.html'), '<!doctype html><p>hi</p>');
writeFileSync(path.join(dir, 'assets', 'app-1.js'), 'console.log(1)');
writeFileSync(path.join(dir, '..', 'outside.txt'), 'no');
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(path.join(dir, '..', 'outside.txt'), { force: true });
});

describe('dashboard pages', () => {
  it('tells pages (no key) from the data API (key)', () => {
    expect(isDashboardPage('/dashboard')).toBe(true);
    expect(isDashboardPage('/dashboard/')).toBe(true);
    expect(isDashboardPage('/dashboard/assets/x.js')).toBe(true);
    expect(isDashboardPage('/dashboard/api')).toBe(false);
    expect(isDashboardPage('/dashboard/api/summary')).toBe(false);
    expect(isDashboardPage('/dashboards')).toBe(false);
    expect(isDashboardPage('/sandboxes')).toBe(false);
  });

  it('serves index.html and hashed files with the CSP and caching, 304 on a matching etag', () => {
    const a = DashboardAssets.load(dir);
    const index = a.lookup('/dashboard/');
    expect(index.status).toBe(200);
    expect(index.headers['content-type']).toMatch(/text\/html/);
    expect(index.headers['content-security-policy']).toBe(CONTENT_SECURITY_POLICY);
    expect(index.headers['cache-control']).toBe('no-cache');
    const js = a.lookup('/dashboard/assets/app-1.js');
    expect(js.headers['cache-control']).toMatch(/immutable/);
    expect(a.lookup('/dashboard/assets/app-1.js', js.headers.etag).status).toBe(304);
    expect(a.lookup('/dashboard').status).toBe(301);
  });

  it('serves only the files the build produced', () => {
    const a = DashboardAssets.load(dir);
    expect(a.lookup('/dashboard/../outside.txt').status).toBe(404);
    expect(a.lookup('/dashboard/%2e%2e/outside.txt').status).toBe(404);
    expect(a.lookup('/dashboard/%E0%A4%A').status).toBe(400);
  });

  it('says how to build it when it is not built', () => {
    const r = DashboardAssets.load(path.join(dir, 'nothing')).lookup('/dashboard/');
    expect(r.status).toBe(503);
    expect(r.body.toString()).toMatch(/npm run build/);
  });

  it('allows no inline script or style', () => {
    expect(CONTENT_SECURITY_POLICY).toMatch(/script-src 'self'(;|$)/);
    expect(CONTENT_SECURITY_POLICY).toMatch(/style-src 'self'(;|$)/);
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/unsafe/);
  });
});
