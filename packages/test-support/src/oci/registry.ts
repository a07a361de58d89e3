/**
 * Registries for the OCI tests, all on 127.0.0.1: Debian's docker-registry (distribution 2.8)
 * with filesystem storage in a temp dir — anonymous, htpasswd (basic) or token auth — and a small
 * in-process fake for faults a real registry does not produce (wrong bytes, 503s).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash, createPrivateKey, sign } from 'node:crypto';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const REGISTRY_BIN = '/usr/bin/docker-registry';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export interface TestRegistry {
  /** host:port */
  readonly host: string;
  readonly dir: string;
  stop(): Promise<void>;
}

/** bcrypt("testpass", cost 4): htpasswd only accepts bcrypt; computed once, the registry only verifies it. */
export const TEST_USER = 'tester';
export const TEST_PASS = 'testpass';
const TEST_HASH = '$2b$04$rlpoESUnJduoX7f.99YKk.ezsqAO5va45LjLVWyUZz1U9J2pfmP0.';

export type RegistryAuth =
  { kind: 'none' } | { kind: 'htpasswd' } | { kind: 'token'; tokenServer: TokenServer };

async function waitUp(host: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited (${child.exitCode}): ${log()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const req = http.get(`http://${host}/v2/`, (res) => {
        res.resume();
        resolve(res.statusCode === 200 || res.statusCode === 401);
      });
      req.on('error', () => resolve(false));
      req.setTimeout(1000, () => req.destroy());
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`docker-registry did not come up on ${host}: ${log()}`);
}

/** Starts docker-registry on a free 127.0.0.1 port with storage in a fresh temp dir. */
export async function startRegistry(auth: RegistryAuth = { kind: 'none' }): Promise<TestRegistry> {
  await access(REGISTRY_BIN).catch(() => {
    throw new Error(
      `${REGISTRY_BIN} is missing: run scripts/setup.sh (apt-get install docker-registry skopeo)`,
    );
  });
  const dir = await mkdtemp(join(tmpdir(), 'aenv-oci-registry-'));
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  let authYaml = '';
  if (auth.kind === 'htpasswd') {
    await writeFile(join(dir, 'htpasswd'), `${TEST_USER}:${TEST_HASH}\n`);
    authYaml = `auth:\n  htpasswd:\n    realm: aenv-test\n    path: ${join(dir, 'htpasswd')}\n`;
  } else if (auth.kind === 'token') {
    authYaml =
      `auth:\n  token:\n    realm: ${auth.tokenServer.realm}\n    service: ${auth.tokenServer.service}\n` +
      `    issuer: ${auth.tokenServer.issuer}\n    rootcertbundle: ${auth.tokenServer.certFile}\n`;
  }
  const config =
    `version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n` +
    `storage:\n  filesystem:\n    rootdirectory: ${join(dir, 'data')}\n  delete:\n    enabled: true\n` +
    `http:\n  addr: ${host}\n  secret: aenv-test-secret\n${authYaml}`;
  await writeFile(join(dir, 'config.yml'), config);
  const child = spawn(REGISTRY_BIN, ['serve', join(dir, 'config.yml')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (d: Buffer) => (out = (out + d.toString()).slice(-4000));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  try {
    await waitUp(host, child, () => out);
  } catch (e) {
    child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    host,
    dir,
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface TokenServer {
  readonly realm: string;
  readonly service: string;
  readonly issuer: string;
  readonly certFile: string;
  /** Token requests seen: whether they carried valid credentials, and the scopes asked for. */
  readonly requests: { authorized: boolean; scopes: string[] }[];
  stop(): Promise<void>;
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

/**
 * A token server for the registry's `token` auth: checks basic credentials (anonymous requests
 * are refused) and returns an ES256 JWT whose x5c chain is the self-signed certificate the
 * registry trusts (rootcertbundle), granting the requested repository actions.
 */
export async function startTokenServer(): Promise<TokenServer> {
  const dir = await mkdtemp(join(tmpdir(), 'aenv-oci-token-'));
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    keyFile,
    '-out',
    certFile,
    '-days',
    '2',
    '-subj',
    '/CN=aenv-test-token',
  ]);
  const key = createPrivateKey(await readFile(keyFile));
  const certDer = Buffer.from(
    (await readFile(certFile, 'utf8')).replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''),
    'base64',
  );
  const service = 'aenv-test-registry';
  const issuer = 'aenv-test-issuer';
  const requests: TokenServer['requests'] = [];
  const expected = `Basic ${Buffer.from(`${TEST_USER}:${TEST_PASS}`).toString('base64')}`;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const scopes = url.searchParams.getAll('scope');
    const authorized = req.headers.authorization === expected;
    requests.push({ authorized, scopes });
    if (!authorized) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ details: 'credentials required' }));
      return;
    }
    const access = scopes.flatMap((s) => {
      const [type, name, actions] = s.split(':');
      return type && name && actions ? [{ type, name, actions: actions.split(',') }] : [];
    });
    const now = Math.floor(Date.now() / 1000);
    const header = { typ: 'JWT', alg: 'ES256', x5c: [certDer.toString('base64')] };
    const claims = {
      iss: issuer,
      sub: TEST_USER,
      aud: url.searchParams.get('service') ?? service,
      exp: now + 300,
      nbf: now - 10,
      iat: now,
      jti: createHash('sha256').update(`${now}${Math.random()}`).digest('hex').slice(0, 16),
      access,
    };
    const signing = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    const sig = sign('sha256', Buffer.from(signing), { key, dsaEncoding: 'ieee-p1363' });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ token: `${signing}.${b64url(sig)}`, expires_in: 300 }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    realm: `http://127.0.0.1:${port}/token`,
    service,
    issuer,
    certFile,
    requests,
    stop: async () => {
      await new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface FakeRegistry {
  readonly host: string;
  /** Blob and manifest bytes by digest; manifests also by "repo:tag". */
  readonly blobs: Map<string, Buffer>;
  readonly manifests: Map<string, { body: Buffer; mediaType: string }>;
  /** Requests seen (method + path). */
  readonly log: string[];
  /** Answer the next N requests with 503. */
  failNext(n: number): void;
  /** Serve these bytes instead of the real blob for `digest`. */
  corrupt(digest: string, bytes: Buffer): void;
  /** The next GET of blob `digest` sends `bytes` bytes and then drops the connection. */
  cutOnce(digest: string, bytes: number): void;
  /** Require this Authorization header (basic challenge otherwise). */
  requireAuth(header: string | null): void;
  /** Answer blob GETs with a 307 to `base` + path (a "CDN"). */
  redirectBlobs(base: string | null): void;
  /** Range headers of blob requests, in order. */
  readonly ranges: (string | undefined)[];
  stop(): Promise<void>;
}

/** Ends a request with the distribution API's JSON error body. */
function sendRegistryError(res: http.ServerResponse, status: number, code: string, message: string) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ errors: [{ code, message }] }));
}

/** The fake's state and its request handling; the faults are switched by FakeRegistry's methods. */
class FakeRegistryServer {
  readonly blobs = new Map<string, Buffer>();
  readonly manifests = new Map<string, { body: Buffer; mediaType: string }>();
  readonly corrupted = new Map<string, Buffer>();
  readonly log: string[] = [];
  readonly cuts = new Map<string, number>();
  readonly ranges: (string | undefined)[] = [];
  failing = 0;
  auth: string | null = null;
  cdn: string | null = null;

  readonly handle = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    this.log.push(`${req.method} ${path}`);
    if (this.auth && req.headers.authorization !== this.auth) {
      res.setHeader('www-authenticate', 'Basic realm="fake"');
      return sendRegistryError(res, 401, 'UNAUTHORIZED', 'authentication required');
    }
    if (this.failing > 0) {
      this.failing--;
      return sendRegistryError(res, 503, 'UNAVAILABLE', 'try later');
    }
    if (path === '/v2/') {
      res.writeHead(200);
      res.end('{}');
      return;
    }
    const m = /^\/v2\/(.+)\/(manifests|blobs)\/([^/]+)$/.exec(path);
    if (!m) {
      res.writeHead(404);
      res.end();
      return;
    }
    const [, repo, kind, ref] = m as unknown as [string, string, string, string];
    if (kind === 'manifests') this.sendManifest(req, res, ref.startsWith('sha256:') ? ref : `${repo}:${ref}`);
    else this.sendBlob(req, res, path, ref);
  };

  private sendManifest(req: http.IncomingMessage, res: http.ServerResponse, key: string): void {
    const hit = this.manifests.get(key);
    if (!hit) return sendRegistryError(res, 404, 'MANIFEST_UNKNOWN', 'manifest unknown');
    res.writeHead(200, { 'content-type': hit.mediaType, 'content-length': hit.body.length });
    res.end(req.method === 'HEAD' ? undefined : hit.body);
  }

  private sendBlob(req: http.IncomingMessage, res: http.ServerResponse, path: string, digest: string): void {
    const body = this.corrupted.get(digest) ?? this.blobs.get(digest);
    if (!body) return sendRegistryError(res, 404, 'BLOB_UNKNOWN', 'blob unknown');
    if (this.cdn) {
      res.writeHead(307, { location: `${this.cdn}${path}` });
      res.end();
      return;
    }
    this.ranges.push(req.headers.range);
    const octets = { 'content-type': 'application/octet-stream' };
    const cut = this.cuts.get(digest);
    if (cut !== undefined) {
      this.cuts.delete(digest);
      res.writeHead(200, { ...octets, 'content-length': body.length });
      res.write(body.subarray(0, cut), () => res.destroy());
      return;
    }
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    if (range) {
      const from = Number(range[1]);
      res.writeHead(206, {
        ...octets,
        'content-length': body.length - from,
        'content-range': `bytes ${from}-${body.length - 1}/${body.length}`,
      });
      res.end(body.subarray(from));
      return;
    }
    res.writeHead(200, { ...octets, 'content-length': body.length });
    res.end(body);
  }
}

/** A minimal read-only distribution API server, for faults. */
export async function startFakeRegistry(): Promise<FakeRegistry> {
  const fake = new FakeRegistryServer();
  const server = http.createServer(fake.handle);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    host: `127.0.0.1:${port}`,
    blobs: fake.blobs,
    manifests: fake.manifests,
    log: fake.log,
    failNext: (n) => {
      fake.failing = n;
    },
    corrupt: (digest, bytes) => fake.corrupted.set(digest, bytes),
    cutOnce: (digest, bytes) => fake.cuts.set(digest, bytes),
    requireAuth: (h) => {
      fake.auth = h;
    },
    redirectBlobs: (base) => {
      fake.cdn = base;
    },
    ranges: fake.ranges,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
