import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/** Headers about one connection, never passed on (RFC 9110 §7.6.1). */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'upgrade', 'http2-settings']);

/**
 * A client's request headers as sent to a node: hop-by-hop headers dropped (the edge server
 * shows HTTP/2 requests as HTTP/1 ones), the client's scheme and host kept in X-Forwarded-*.
 */
export function requestHeaders(
  headers: IncomingHttpHeaders,
  opts: { upgrade: boolean; tls: boolean; extra?: Record<string, string> },
): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) continue;
    if (HOP.has(k) && !(opts.upgrade && (k === 'upgrade' || k === 'connection'))) continue;
    out[k] = v;
  }
  if (!out['x-forwarded-proto']) out['x-forwarded-proto'] = opts.tls ? 'https' : 'http';
  if (!out['x-forwarded-host'] && out.host) out['x-forwarded-host'] = out.host;
  return { ...out, ...opts.extra };
}
