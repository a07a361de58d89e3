import type { IncomingMessage } from 'node:http';

/** Headers that describe one hop, or our routing, and are not passed to the sandbox. */
const DROP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'http2-settings',
  'e2b-sandbox-id',
  'e2b-sandbox-port',
  'x-agentenv-sandbox-id',
  'x-agentenv-target-port',
  'e2b-traffic-access-token',
  'x-api-key',
]);

/** What of a client's request its headers are copied from (an HTTP/2 one shows Host in `headers`). */
export type HeaderSource = Pick<IncomingMessage, 'rawHeaders' | 'headers'>;

/**
 * A request's headers as a flat `[name, value, …]` list (the form http.request sends as given),
 * with each name spelled as the client sent it: E2B's proxy hands sandboxes `Host:`, not `host:`.
 * `keep` decides by the lower-cased name; HTTP/2 pseudo-headers never pass. The Host is `host`
 * when given, else the client's (an HTTP/2 client's :authority), and is always spelled `Host`, as
 * Go's proxy writes it whatever the client sent (fetch and HTTP/2 send `host`).
 */
export function copyRawHeaders(req: HeaderSource, keep: (name: string) => boolean, host?: string): string[] {
  const out: string[] = [];
  let hostAt = -1;
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (name.startsWith(':') || !keep(lower)) continue;
    if (lower === 'host') {
      if (hostAt >= 0) continue;
      hostAt = out.length;
    }
    out.push(lower === 'host' ? 'Host' : name, req.rawHeaders[i + 1]!);
  }
  const value = host ?? (hostAt < 0 ? req.headers.host : undefined);
  if (value !== undefined) {
    if (hostAt >= 0) out[hostAt + 1] = value;
    else out.push('Host', value);
  }
  return out;
}

/**
 * A client's headers as sent on to a sandbox: routing, hop-by-hop and API-key headers dropped
 * (an upgrade keeps its Upgrade and Connection), the Host replaced by `opts.host` when given (a
 * sandbox's maskRequestHost).
 */
export function forwardHeaders(req: HeaderSource, opts: { keepUpgrade: boolean; host?: string }): string[] {
  const keep = (k: string) => !DROP.has(k) || (opts.keepUpgrade && (k === 'upgrade' || k === 'connection'));
  return copyRawHeaders(req, keep, opts.host);
}
