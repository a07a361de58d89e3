import { Agent, request } from 'node:http';
import { connect } from 'node:net';

/** mulberry32: a small seeded PRNG, so a failing run can be replayed with its seed. */
export class Rng {
  constructor(private s: number) {}
  next(): number {
    this.s = (this.s + 0x6d2b79f5) | 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  bytes(n: number): Buffer {
    return Buffer.from(Array.from({ length: n }, () => this.int(256)));
  }
}

/** What a target is sent: its real routes to mutate, and how its requests are addressed. */
export interface FuzzTarget {
  name: string;
  port: number;
  /** Paths of the target's real routes (`{id}` is replaced by a random id). */
  paths: readonly string[];
  /** Prepended to every path (envd through the node's proxy: `/proxy/{id}/49983`). */
  prefix?: string;
  /** The key a caller with access would send (only on requests that cannot change state). */
  apiKey: string;
  /** The key only on safe methods: every body a key holder sends could be a real call. */
  keyOnSafeOnly?: boolean;
  /** Headers every request carries (a sandbox's Host). */
  headers?: Record<string, string>;
}

export interface Tally {
  requests: number;
  byClass: Record<string, number>;
  /** Unexpected 5xx answers, by `status body`: how many, and the first request that got one. */
  serverErrors: Map<string, { count: number; request: string }>;
  /** The name of a 5xx that is not a failure of the process (E2B's 502 for a sandbox it cannot reach). */
  designed: (status: number, body: string, method: string) => string | undefined;
}

const METHODS = ['GET', 'GET', 'GET', 'HEAD', 'POST', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'];
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
const JUNK_SEGMENTS = [
  '%E0',
  '%00',
  '%',
  '%zz',
  '%C0%AF',
  '%2e%2e',
  '..',
  '.',
  '',
  '%2F',
  '%252F',
  ';x=1',
  '\\',
  '~',
  '%F0%9F%92%A9',
  'ä',
  '*',
  'null',
  '-1',
  '1e309',
];
const QUERIES = [
  '',
  '?limit=-1',
  '?limit=1e309&offset=NaN',
  '?state=%E0',
  '?metadata=%ZZ',
  '?metadata=a%3D',
  '?path=/../../etc/passwd',
  '?sandboxID=..%2F..',
  '?a=1&a=2&a=3',
  '?%00=%00',
  '?signature=x&signature_expiration=-1&path=/x',
  '?logsOffset=99999999999999999999',
  '?' + 'q='.repeat(300),
];
const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-16',
  'text/plain',
  'multipart/form-data; boundary=',
  'application/x-www-form-urlencoded',
  'application/connect+json',
  'application/proto',
  '*/*',
  '',
];

function randomId(rng: Rng): string {
  const alphabet = rng.chance(0.8) ? 'abcdefghijklmnopqrstuvwxyz0123456789' : 'ABC-_.%/xyz09';
  return Array.from({ length: 1 + rng.int(rng.chance(0.9) ? 24 : 120) }, () => rng.pick([...alphabet])).join(
    '',
  );
}

/** `path` changed in 0–3 of the ways an attacker spells a path. */
function mutatePath(rng: Rng, path: string): string {
  let p = path.replace(/\{id\}/g, () => randomId(rng));
  for (let n = rng.int(4); n > 0; n--) {
    const at = 1 + rng.int(Math.max(1, p.length - 1));
    switch (rng.int(7)) {
      case 0: {
        const c = p.charCodeAt(at);
        if (!Number.isNaN(c) && c < 128) p = `${p.slice(0, at)}%${c.toString(16)}${p.slice(at + 1)}`;
        break;
      }
      case 1:
        p = p.replace(/%/g, '%25');
        break;
      case 2:
        p = `${p.slice(0, at)}/${rng.pick(JUNK_SEGMENTS)}/${p.slice(at)}`;
        break;
      case 3:
        p = `${p.slice(0, at)}/${p.slice(at)}`;
        break;
      case 4:
        p = p.slice(0, at) + p.charAt(at).toUpperCase() + p.slice(at + 1);
        break;
      case 5:
        p = `${p}/${'a'.repeat(rng.int(6000))}`;
        break;
      default:
        p = `/health/..${p}`;
    }
  }
  return (p.startsWith('/') ? p : `/${p}`) + rng.pick(QUERIES);
}

function randomBody(rng: Rng): Buffer | undefined {
  switch (rng.int(6)) {
    case 0:
      return undefined;
    case 1:
      return Buffer.from(rng.pick(['{', '[]', 'null', '{"templateID":', '{"a":' + '['.repeat(5000), '""']));
    case 2:
      return rng.bytes(rng.int(2048));
    case 3:
      // Now and then one over the 1 MiB body limit.
      return Buffer.alloc(rng.chance(0.05) ? (1 << 20) + 1 : rng.int(8192), 'x');
    case 4:
      return Buffer.from('\u0000\uffff\ud800');
    default:
      return Buffer.alloc(0);
  }
}

export interface HttpCase {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

/**
 * A request Node's HTTP client can send: a real route's path mutated, random headers, a random
 * body. The right key only goes with a request that cannot change anything (a safe method, or a
 * body no route parses), so the fuzzer never creates or deletes for real.
 */
export function httpCase(rng: Rng, t: FuzzTarget): HttpCase {
  const method = rng.pick(METHODS);
  const body = SAFE.has(method) && rng.chance(0.7) ? undefined : randomBody(rng);
  const parses = body !== undefined && body.length > 0 && body[0] === 0x7b;
  const headers: Record<string, string> = { ...t.headers };
  const key = rng.int(3);
  if (key === 1) headers['x-api-key'] = rng.pick(['wrong', '', t.apiKey.toUpperCase(), t.apiKey + 'x']);
  if (key === 2 && (SAFE.has(method) || (!parses && !t.keyOnSafeOnly))) headers['x-api-key'] = t.apiKey;
  if (body !== undefined || rng.chance(0.3)) headers['content-type'] = rng.pick(CONTENT_TYPES);
  if (rng.chance(0.15)) headers['e2b-sandbox-id'] = randomId(rng);
  if (rng.chance(0.15))
    headers['e2b-sandbox-port'] = rng.pick(['0', '-1', '65536', '49983', 'x', '3000', '']);
  if (rng.chance(0.1))
    headers.host = rng.pick([`3000-${randomId(rng)}.aenv.test`, 'x', '[::1', `49983-.aenv.test`]);
  if (rng.chance(0.1)) headers.authorization = rng.pick(['Bearer ', 'Basic %%%', 'x'.repeat(4000)]);
  if (rng.chance(0.1)) headers['idempotency-key'] = randomId(rng);
  if (rng.chance(0.05)) headers['if-none-match'] = '"' + randomId(rng);
  if (rng.chance(0.05)) headers['accept-encoding'] = 'gzip;q=-1, *;q=NaN';
  return {
    method,
    path: (t.prefix ?? '') + mutatePath(rng, rng.pick(t.paths)),
    headers,
    ...(body ? { body } : {}),
  };
}

/** One raw exchange on its own socket: bytes, then how the client behaves after them. */
export interface RawCase {
  chunks: Buffer[];
  /** `end`: half-close after writing; `abort`: destroy without reading; `read`: wait for an answer. */
  then: 'read' | 'end' | 'abort';
  /** Pause between chunks (a slow client). */
  gapMs: number;
}

/** A malformed or adversarial request no ordinary client would send. */
export function rawCase(rng: Rng, t: FuzzTarget): RawCase {
  const path = (t.prefix ?? '') + mutatePath(rng, rng.pick(t.paths));
  const host = `host: ${t.headers?.host ?? '127.0.0.1'}\r\n`;
  const key = rng.chance(0.5) && !t.keyOnSafeOnly ? `x-api-key: ${t.apiKey}\r\n` : '';
  const texts = [
    `GET // HTTP/1.1\r\n${host}\r\n`,
    `GET %E0 HTTP/1.1\r\n${host}\r\n`,
    `GET /%E0%00 HTTP/1.1\r\n${host}${key}\r\n`,
    `GET /${'a'.repeat(70_000)} HTTP/1.1\r\n${host}\r\n`,
    `GET http://x/health HTTP/1.1\r\n${host}\r\n`,
    `GET http://[::1 HTTP/1.1\r\n${host}\r\n`,
    `GET ${path.replace(/ /g, '%20')}\r\n\r\n`,
    `GET ${path} HTTP/9.9\r\n${host}\r\n`,
    `GET ${path} HTTP/1.1\r\n\r\n`,
    `GET ${path} HTTP/1.1\r\n${host}bad header\r\n\r\n`,
    `GET ${path} HTTP/1.1\r\n${host}x-a: \u0000\r\n\r\n`,
    `POST ${path} HTTP/1.1\r\n${host}${key}content-length: 5\r\ncontent-length: 6\r\n\r\nhello`,
    `POST ${path} HTTP/1.1\r\n${host}${key}content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`,
    `POST ${path} HTTP/1.1\r\n${host}${key}transfer-encoding: chunked\r\n\r\nzz\r\nxx\r\n`,
    `POST ${path} HTTP/1.1\r\n${host}${key}content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"a":`,
    `GET ${path} HTTP/1.1\r\n${host}${key}connection: upgrade\r\nupgrade: websocket\r\n\r\n`,
    `GET ${path} HTTP/1.1\r\n${host}${key}connection: upgrade\r\nupgrade: websocket\r\nsec-websocket-key: %%%\r\nsec-websocket-version: 99\r\ne2b-sandbox-id: ${randomId(rng)}\r\ne2b-sandbox-port: 3000\r\n\r\n\u0081\u00ff`,
    `GET ${path} HTTP/1.1\r\n${host}connection: upgrade\r\nupgrade: h2c\r\nhttp2-settings: %%\r\n\r\n`,
    `CONNECT 127.0.0.1:22 HTTP/1.1\r\n${host}\r\n`,
    `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n${rng.bytes(64).toString('latin1')}`,
    `GET ${path} HTTP/1.1\r\n${host}${'x-h: y\r\n'.repeat(3000)}\r\n`,
    `${rng.bytes(1 + rng.int(512)).toString('latin1')}\r\n\r\n`,
    `GET /health HTTP/1.1\r\n${host}\r\nGARBAGE / HTTP/1.1\r\n\r\n`,
  ];
  const text = Buffer.from(rng.pick(texts), 'latin1');
  const pieces = rng.chance(0.3) ? 2 + rng.int(4) : 1;
  const size = Math.ceil(text.length / pieces);
  const chunks = Array.from({ length: pieces }, (_, i) => text.subarray(i * size, (i + 1) * size));
  return { chunks, then: rng.pick(['read', 'read', 'read', 'end', 'abort']), gapMs: pieces > 1 ? 20 : 0 };
}

function count(t: Tally, status: number, body: string, method: string, request: string): void {
  t.requests++;
  const designed = status >= 500 ? t.designed(status, body, method) : undefined;
  const cls = status === 0 ? 'no answer' : (designed ?? `${Math.floor(status / 100)}xx`);
  t.byClass[cls] = (t.byClass[cls] ?? 0) + 1;
  if (status >= 500 && !designed) {
    const k = `${status} ${body.slice(0, 160)}`;
    const seen = t.serverErrors.get(k) ?? { count: 0, request: request.slice(0, 400) };
    seen.count++;
    t.serverErrors.set(k, seen);
  }
}

/** Sends `c` over the keep-alive `agent`; an event stream is cut once its status is known. */
export function sendHttp(agent: Agent, port: number, c: HttpCase, tally: Tally): Promise<void> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (status: number, body: string) => {
      if (done) return;
      done = true;
      count(
        tally,
        status,
        body,
        c.method,
        JSON.stringify({ ...c, body: c.body?.subarray(0, 100).toString() }),
      );
      resolve();
    };
    const req = request({
      host: '127.0.0.1',
      port,
      method: c.method,
      path: c.path,
      headers: c.headers,
      agent,
    });
    req.setTimeout(5000, () => req.destroy());
    req.on('error', () => finish(0, ''));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (String(res.headers['content-type']).includes('event-stream')) {
        res.destroy();
        return finish(status, '');
      }
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.length < 4 && chunks.push(d));
      res.on('end', () => finish(status, Buffer.concat(chunks).toString('utf8')));
      res.on('error', () => finish(status, ''));
    });
    req.end(c.body);
  });
}

/**
 * Whether `got` holds a whole HTTP/1.1 answer to `method`: its head, then the body its
 * content-length or chunked framing announces (an answer delimited by the connection's end is
 * whole only once the connection closes).
 */
export function answered(got: string, method: string): boolean {
  const headEnd = got.indexOf('\r\n\r\n');
  if (headEnd < 0) return false;
  const head = got.slice(0, headEnd).toLowerCase();
  const status = Number(/^http\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
  if (method === 'HEAD' || status === 101 || status === 204 || status === 304) return true;
  const body = got.slice(headEnd + 4);
  const length = /\r\ncontent-length: *(\d+)/.exec(head);
  if (length) return body.length >= Number(length[1]);
  if (/\r\ntransfer-encoding: *chunked/.test(head)) return /(^|\r\n)0\r\n\r\n$/.test(body);
  return false;
}

/** Sends `c` on a fresh socket and reads the status line of what comes back, if anything. */
export function sendRaw(port: number, c: RawCase, tally: Tally): Promise<void> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let got = '';
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(got);
      const sent = Buffer.concat(c.chunks).toString('latin1');
      count(tally, m ? Number(m[1]) : 0, got.slice(got.indexOf('\r\n\r\n') + 4), sent.split(' ')[0]!, sent);
      resolve();
    };
    // A client that waits for an answer stops at its end: a kept-alive connection stays open.
    const timer = setTimeout(finish, 2000);
    const method = c.chunks[0]!.toString('latin1').split(' ')[0]!;
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.length > 4096 || answered(got, method)) finish();
    });
    s.on('error', finish);
    s.on('close', finish);
    s.on('connect', async () => {
      for (const chunk of c.chunks) {
        if (s.destroyed) return;
        s.write(chunk);
        if (c.gapMs) await new Promise((r) => setTimeout(r, c.gapMs));
      }
      if (c.then === 'end') s.end();
      else if (c.then === 'abort') setTimeout(finish, 50);
    });
  });
}

/**
 * `total` requests to `t` from `seed`: most through a keep-alive client, `concurrency` at a time;
 * a share of them raw and malformed on sockets of their own, `rawConcurrency` at a time (a raw
 * request the target waits on for more bytes holds its socket until the client gives up, and
 * costs the target nothing meanwhile).
 */
export async function fuzz(
  t: FuzzTarget,
  seed: number,
  total: number,
  designed: Tally['designed'],
  { concurrency = 16, rawConcurrency = 64 } = {},
): Promise<Tally> {
  const rng = new Rng(seed);
  const tally: Tally = { requests: 0, byClass: {}, serverErrors: new Map(), designed };
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const cases = Array.from({ length: total }, () =>
    rng.chance(0.15) ? { raw: rawCase(rng, t) } : { http: httpCase(rng, t) },
  );
  const pool = async <C>(todo: C[], width: number, send: (c: C) => Promise<void>) => {
    let next = 0;
    const worker = async () => {
      while (next < todo.length) await send(todo[next++]!);
    };
    await Promise.all(Array.from({ length: width }, worker));
  };
  await Promise.all([
    pool(
      cases.flatMap((c) => (c.http ? [c.http] : [])),
      concurrency,
      (c) => sendHttp(agent, t.port, c, tally),
    ),
    pool(
      cases.flatMap((c) => (c.raw ? [c.raw] : [])),
      rawConcurrency,
      (c) => sendRaw(t.port, c, tally),
    ),
  ]);
  agent.destroy();
  return tally;
}

/** One line per target: `fuzz node: 10000 requests, 9731 4xx, 0 5xx, 0 restarts`. */
export function summary(name: string, t: Tally, restarts: number): string {
  const classes = ['2xx', '3xx', '4xx', '5xx']
    .map((k) => `${t.byClass[k] ?? 0} ${k}`)
    .concat(
      Object.entries(t.byClass)
        .filter(([k]) => !/^\dxx$/.test(k))
        .map(([k, n]) => `${n} ${k}`),
    )
    .join(', ');
  return `fuzz ${name}: ${t.requests} requests, ${classes}, ${restarts} restarts`;
}
