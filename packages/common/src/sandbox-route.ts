import type { IncomingHttpHeaders } from 'node:http';

/** Where a request to the node goes when it is sandbox traffic. */
export interface SandboxRoute {
  sandboxId: string;
  port: number;
  /** Path and query to send to the sandbox. */
  path: string;
  /** Came through the native /proxy/{id}/{port}/ path (410 instead of 502 for paused sandboxes). */
  native: boolean;
}

const header = (h: IncomingHttpHeaders, name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

function port(s: string | undefined): number | undefined {
  if (!s || !/^\d{1,5}$/.test(s)) return undefined;
  const n = Number(s);
  return n >= 1 && n <= 65535 ? n : undefined;
}

const ID = /^[a-z0-9]{1,64}$/;

/**
 * Decides whether a request is for a sandbox (E2B-COMPAT.md §1): routing headers, a
 * `{port}-{id}.{domain}` Host for a configured domain, or a `/proxy/…` path. Anything else
 * belongs to the API. Pure, so every case is unit-tested.
 */
export function routeRequest(
  url: string,
  headers: IncomingHttpHeaders,
  domains: readonly string[],
): SandboxRoute | undefined {
  const id = header(headers, 'e2b-sandbox-id') ?? header(headers, 'x-agentenv-sandbox-id');
  const p = header(headers, 'e2b-sandbox-port') ?? header(headers, 'x-agentenv-target-port');
  if (id !== undefined || p !== undefined) {
    const n = port(p);
    if (!id || !ID.test(id) || n === undefined)
      return { sandboxId: id ?? '', port: n ?? 0, path: url, native: false };
    return {
      sandboxId: id,
      port: n,
      path: url.startsWith('/proxy/') ? url.slice('/proxy'.length) : url,
      native: false,
    };
  }
  const host = (header(headers, 'host') ?? '').toLowerCase().replace(/:\d+$/, '');
  for (const d of domains) {
    const suffix = '.' + d.toLowerCase();
    if (!host.endsWith(suffix)) continue;
    const label = host.slice(0, -suffix.length);
    const dash = label.indexOf('-');
    const n = port(label.slice(0, dash));
    const sid = label.slice(dash + 1);
    if (dash > 0 && n !== undefined && ID.test(sid))
      return { sandboxId: sid, port: n, path: url, native: false };
  }
  const m = /^\/proxy\/([a-z0-9]{1,64})\/(\d{1,5})(\/.*|\?.*)?$/.exec(url);
  if (m) {
    const n = port(m[2]);
    const rest = m[3] ?? '/';
    if (n !== undefined)
      return { sandboxId: m[1]!, port: n, path: rest.startsWith('?') ? '/' + rest : rest, native: true };
  }
  return undefined;
}
