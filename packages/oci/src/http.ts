import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import dns, { type LookupAddress, type LookupAllOptions } from 'node:dns';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { OciError } from './errors.js';

const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 16 });
const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 16 });

export interface HttpRequest {
  readonly method?: 'GET' | 'HEAD' | 'POST';
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  /** Idle time on the socket (connect, headers, each body chunk) before the request fails. */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  readonly maxRedirects?: number;
  /** Why the host may not be reached at a resolved `address` (the request then fails for good). */
  readonly addressRefusal?: (address: string) => string | undefined;
  /** Why a redirect to `next` may not be followed (the request then fails for good), if it may not. */
  readonly redirectRefusal?: (next: URL) => string | undefined;
}

export interface HttpResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: IncomingMessage;
  /** The URL that answered, after redirects. */
  readonly url: URL;
}

/** A transport-level failure (no HTTP status): worth retrying. */
export class NetworkError extends Error {
  override readonly name = 'NetworkError';
  constructor(
    message: string,
    readonly code?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

type Resolve = (
  host: string,
  options: LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * A `lookup` for a connection that fails (with an OciError, not retried) when the name resolves
 * to an address `refusal` names a reason against: names are judged by where they lead.
 */
export function guardedLookup(
  refusal: (address: string) => string | undefined,
  resolve: Resolve = dns.lookup,
): LookupFunction {
  return (host, options, callback) => {
    resolve(host, { ...options, all: true }, (err, addresses) => {
      const done = callback as (e: Error | null, a: string | LookupAddress[], family?: number) => void;
      if (err) return done(err, '');
      for (const a of addresses) {
        const why = refusal(a.address);
        if (why) return done(new OciError('unauthorized', `${host} resolves to ${a.address}: ${why}`), '');
      }
      if (options.all) return done(null, addresses);
      const first = addresses[0];
      if (!first) return done(Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' }), '');
      done(null, first.address, first.family);
    });
  };
}

function once(url: URL, req: HttpRequest): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const mod = url.protocol === 'https:' ? https : http;
    const r = mod.request(
      url,
      {
        method: req.method ?? 'GET',
        headers: { 'user-agent': 'agentenv/0.1', ...req.headers },
        agent: url.protocol === 'https:' ? httpsAgent : httpAgent,
        ...(req.signal ? { signal: req.signal } : {}),
        ...(req.addressRefusal ? { lookup: guardedLookup(req.addressRefusal) } : {}),
      },
      (res) => {
        res.setTimeout(req.timeoutMs, () =>
          res.destroy(new NetworkError(`no data from ${url.host} for ${req.timeoutMs} ms`, 'ETIMEDOUT')),
        );
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res, url });
      },
    );
    r.setTimeout(req.timeoutMs, () =>
      r.destroy(new NetworkError(`no answer from ${url.host} within ${req.timeoutMs} ms`, 'ETIMEDOUT')),
    );
    r.on('error', (e: NodeJS.ErrnoException) => {
      if (e.name === 'AbortError') reject(e);
      else if (e instanceof NetworkError || e instanceof OciError) reject(e);
      else reject(new NetworkError(`${url.host}: ${e.message}`, e.code, { cause: e }));
    });
    r.end(req.body);
  });
}

/**
 * One HTTP exchange, following redirects (blob downloads usually redirect to a CDN). The
 * Authorization header is only sent to the host it was meant for, never to a redirect target.
 */
export async function send(url: URL, req: HttpRequest): Promise<HttpResponse> {
  let cur = url;
  let curReq = req;
  for (let hop = 0; ; hop++) {
    const res = await once(cur, curReq);
    if (!REDIRECTS.has(res.status) || !res.headers.location) return res;
    res.body.resume();
    if (hop >= (req.maxRedirects ?? 5))
      throw new NetworkError(`too many redirects from ${url.host}`, 'EREDIRECT');
    const next = new URL(res.headers.location, cur);
    if (next.protocol !== 'http:' && next.protocol !== 'https:') {
      throw new NetworkError(`redirect to unsupported URL scheme ${next.protocol}`, 'EREDIRECT');
    }
    const refused = req.redirectRefusal?.(next);
    if (refused) throw new OciError('unauthorized', `${url.host} redirected to ${next.href}: ${refused}`);
    const headers = { ...curReq.headers };
    if (next.host !== url.host || (url.protocol === 'https:' && next.protocol === 'http:')) {
      delete headers.authorization;
    }
    curReq = {
      ...curReq,
      headers,
      ...(res.status === 303 ? { method: 'GET' as const, body: undefined } : {}),
    };
    cur = next;
  }
}

/** Reads a whole (small) response body, refusing more than `limit` bytes. */
export async function readBody(res: HttpResponse, limit: number): Promise<Buffer> {
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    res.body.destroy();
    throw new Error(`response from ${res.url.host} too large (${declared} bytes > ${limit})`);
  }
  const chunks: Buffer[] = [];
  let n = 0;
  try {
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      n += chunk.length;
      if (n > limit) {
        res.body.destroy();
        throw new Error(`response from ${res.url.host} too large (> ${limit} bytes)`);
      }
      chunks.push(chunk);
    }
  } catch (e) {
    if (e instanceof Error && e.message.includes('too large')) throw e;
    throw new NetworkError(`${res.url.host}: reading the response failed: ${(e as Error).message}`, 'EBODY', {
      cause: e,
    });
  }
  return Buffer.concat(chunks);
}

/** Discards a response body so the connection can be reused. */
export function drain(res: HttpResponse): void {
  res.body.resume();
}
