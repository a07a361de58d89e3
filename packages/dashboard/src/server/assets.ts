import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { packageDir } from '@agentenv/common';

/** Where the dashboard is served, on a node and on a gateway. */
export const DASHBOARD_PATH = '/dashboard';
/** Its data routes (need the API key, unlike the pages). */
export const DASHBOARD_API_PATH = '/dashboard/api';

/** The built single-page app (`npm run build`): dist/app of this package. */
export function dashboardDir(): string {
  return path.join(packageDir('@agentenv/dashboard', import.meta.url), 'dist', 'app');
}

/**
 * The pages allow nothing inline and nothing from elsewhere: scripts and styles come from the
 * dashboard's own files, data from the same origin's API.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

export interface AssetResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** True for the dashboard's pages and files (served without a key), not its API. */
export function isDashboardPage(pathname: string): boolean {
  if (pathname === DASHBOARD_PATH) return true;
  return (
    pathname.startsWith(`${DASHBOARD_PATH}/`) &&
    !pathname.startsWith(`${DASHBOARD_API_PATH}/`) &&
    pathname !== DASHBOARD_API_PATH
  );
}

interface File {
  body: Buffer;
  type: string;
  etag: string;
}

/**
 * The built app, read into memory once (a few hundred KiB): `lookup` answers a GET for a
 * dashboard path. Hashed files under assets/ are cached for good; index.html is revalidated.
 */
export class DashboardAssets {
  private constructor(
    private readonly files: Map<string, File> | undefined,
    private readonly dir: string,
  ) {}

  static load(dir = dashboardDir()): DashboardAssets {
    if (!existsSync(path.join(dir, 'index.html'))) return new DashboardAssets(undefined, dir);
    const files = new Map<string, File>();
    const walk = (rel: string) => {
      for (const name of readdirSync(path.join(dir, rel))) {
        const r = rel ? `${rel}/${name}` : name;
        const full = path.join(dir, r);
        if (statSync(full).isDirectory()) walk(r);
        else {
          const body = readFileSync(full);
          files.set(r, {
            body,
            type: TYPES[path.extname(name)] ?? 'application/octet-stream',
            etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
          });
        }
      }
    };
    walk('');
    return new DashboardAssets(files, dir);
  }

  /** The answer for `pathname` (a dashboard page path); `ifNoneMatch` from the request. */
  lookup(pathname: string, ifNoneMatch?: string): AssetResponse {
    if (!this.files) {
      return this.text(
        503,
        `the dashboard is not built (no ${path.join(this.dir, 'index.html')}): run npm run build`,
      );
    }
    if (pathname === DASHBOARD_PATH) {
      return {
        status: 301,
        headers: { ...SECURITY_HEADERS, location: `${DASHBOARD_PATH}/` },
        body: Buffer.alloc(0),
      };
    }
    let rel: string;
    try {
      rel = decodeURIComponent(pathname.slice(DASHBOARD_PATH.length + 1));
    } catch {
      return this.text(400, `bad path ${pathname}`);
    }
    // Only names the build produced are served: no path is ever joined onto the disk.
    const name = rel === '' ? 'index.html' : rel;
    const file = this.files.get(name);
    if (!file) return this.text(404, `no dashboard file ${rel}`);
    const cache = name.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache';
    const headers = {
      ...SECURITY_HEADERS,
      'content-type': file.type,
      'cache-control': cache,
      etag: file.etag,
    };
    if (ifNoneMatch === file.etag) return { status: 304, headers, body: Buffer.alloc(0) };
    return { status: 200, headers, body: file.body };
  }

  private text(status: number, message: string): AssetResponse {
    return {
      status,
      headers: {
        ...SECURITY_HEADERS,
        'content-type': 'text/plain; charset=utf-8',
        'cache-control': 'no-store',
      },
      body: Buffer.from(`${message}\n`),
    };
  }
}
