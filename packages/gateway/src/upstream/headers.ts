import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { copyRawHeaders, type HeaderSource } from '@agentenv/common';

/** Headers about one connection, never passed on (RFC 9110 §7.6.1). */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'upgrade', 'http2-settings']);

interface HeaderOptions {
  upgrade: boolean;
  tls: boolean;
  extra?: Record<string, string>;
}

const passes = (name: string, upgrade: boolean) =>
  !HOP.has(name) || (upgrade && (name === 'upgrade' || name === 'connection'));

/**
 * A client's request headers as sent to a node: hop-by-hop headers dropped (the edge server
 * shows HTTP/2 requests as HTTP/1 ones), the client's scheme and host kept in X-Forwarded-*.
 */
export function requestHeaders(headers: IncomingHttpHeaders, opts: HeaderOptions): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined && passes(k, opts.upgrade)) out[k] = v;
  }
  if (!out['x-forwarded-proto']) out['x-forwarded-proto'] = opts.tls ? 'https' : 'http';
  if (!out['x-forwarded-host'] && out.host) out['x-forwarded-host'] = out.host;
  return { ...out, ...opts.extra };
}

/**
 * The same headers as a flat `[name, value, …]` list with each name spelled as the client sent
 * it, for requests streamed through to a sandbox (its server sees `Host:`, as behind E2B's proxy).
 */
export function rawRequestHeaders(req: HeaderSource, opts: HeaderOptions): string[] {
  const out = copyRawHeaders(req, (name) => passes(name, opts.upgrade));
  const has = (name: string) => req.headers[name] !== undefined;
  if (!has('x-forwarded-proto')) out.push('X-Forwarded-Proto', opts.tls ? 'https' : 'http');
  if (!has('x-forwarded-host') && req.headers.host) out.push('X-Forwarded-Host', req.headers.host);
  for (const [k, v] of Object.entries(opts.extra ?? {})) out.push(k, v);
  return out;
}
