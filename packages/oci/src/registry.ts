import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { basicAuthHeader, parseChallenges, pullScope, type Challenge, type Credentials } from './auth.js';
import { BlobFile, resumeHeaders, resumeStep, type BlobProgress } from './blob-download.js';
import {
  badTokenResponse,
  parseTokenResponse,
  realmAddressRefusal,
  realmRefusal,
  tokenRealm,
  tokenRequest,
  type CachedToken,
} from './bearer-token.js';
import { OciError, type OciErrorCode } from './errors.js';
import { drain, NetworkError, readBody, send, type HttpResponse } from './http.js';
import { MANIFEST_ACCEPT } from './manifest.js';
import { isLoopbackRegistry, registryEndpoint } from './reference.js';

export interface RetryOptions {
  /** Total tries per request, first one included (default 5). */
  readonly attempts?: number;
  /** First back-off delay; doubles each retry, with jitter (default 250 ms). */
  readonly baseDelayMs?: number;
  /** Cap of one back-off delay, also of a server's Retry-After (default 8 s). */
  readonly maxDelayMs?: number;
}

export interface RegistryClientOptions {
  readonly credentials?: Credentials;
  /** Speak plain HTTP (always the case for loopback registries). */
  readonly insecure?: boolean;
  readonly retry?: RetryOptions;
  /** Idle timeout of one request (default 30 s). */
  readonly timeoutMs?: number;
  /** Called before each retry (for logs and tests). */
  readonly onRetry?: (info: { attempt: number; delayMs: number; reason: string }) => void;
}

export interface FetchedManifest {
  readonly body: Buffer;
  readonly contentType: string | undefined;
  /** sha256 of the bytes received (verified against the requested digest, if one was given). */
  readonly digest: string;
}

export interface BlobDownloadOptions {
  readonly what: string;
  readonly signal?: AbortSignal;
  readonly onProgress?: (p: BlobProgress) => void;
  /** fsync the file before it counts as downloaded. */
  readonly sync?: boolean;
}

const MANIFEST_LIMIT = 4 << 20;
const TOKEN_LIMIT = 1 << 20;
const RETRIABLE_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);

/** A response status that may succeed when retried. */
class RetriableStatus extends Error {
  constructor(
    readonly status: number,
    readonly retryAfterMs: number | undefined,
    message: string,
  ) {
    super(message);
  }
}

function retryAfter(res: HttpResponse): number | undefined {
  const h = res.headers['retry-after'];
  if (!h) return undefined;
  const secs = Number(h);
  if (Number.isFinite(secs)) return secs * 1000;
  const at = Date.parse(h);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

/** A status worth retrying becomes a RetriableStatus, so `retrying` tries again. */
async function throwIfRetriable(res: HttpResponse, context: string): Promise<void> {
  if (!RETRIABLE_STATUS.has(res.status)) return;
  const detail = await errorDetail(res);
  throw new RetriableStatus(res.status, retryAfter(res), `${context}: ${detail}`);
}

/** `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"…"}]}` → `MANIFEST_UNKNOWN: …`. */
async function errorDetail(res: HttpResponse): Promise<string> {
  const body = await readBody(res, 64 << 10).catch(() => Buffer.alloc(0));
  try {
    const doc = JSON.parse(body.toString('utf8')) as { errors?: { code?: string; message?: string }[] };
    const parts = (doc.errors ?? []).map((e) => [e.code, e.message].filter(Boolean).join(': '));
    if (parts.length) return parts.join('; ');
  } catch {
    // not the registry's JSON error format
  }
  return body.toString('utf8').slice(0, 200).trim() || `HTTP ${res.status}`;
}

/**
 * A client for one registry (Docker Registry HTTP API v2 / OCI distribution): anonymous, basic
 * or bearer-token auth (the token is fetched when a request is challenged and reused until it
 * expires), bounded retries with exponential back-off on network errors and 5xx/429, manifests
 * and blobs whose bytes are checked against their sha256 digest.
 */
export class RegistryClient {
  readonly base: URL;
  private readonly tokens = new Map<string, CachedToken>();
  private basic: string | undefined;
  private readonly attempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly timeoutMs: number;

  constructor(
    readonly registry: string,
    private readonly opts: RegistryClientOptions = {},
  ) {
    const scheme = opts.insecure || isLoopbackRegistry(registry) ? 'http' : 'https';
    this.base = new URL(`${scheme}://${registryEndpoint(registry)}/v2/`);
    this.attempts = Math.max(1, opts.retry?.attempts ?? 5);
    this.baseDelayMs = opts.retry?.baseDelayMs ?? 250;
    this.maxDelayMs = opts.retry?.maxDelayMs ?? 8000;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /** Runs `fn` until it succeeds, fails for good, or the attempts are used up. */
  async retrying<T>(what: string, fn: (attempt: number) => Promise<T>, signal?: AbortSignal): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn(attempt);
      } catch (e) {
        const retriable = e instanceof NetworkError || e instanceof RetriableStatus;
        if (!retriable || signal?.aborted) throw e;
        if (attempt >= this.attempts) {
          const code: OciErrorCode = e instanceof RetriableStatus ? 'registry_error' : 'registry_unavailable';
          throw new OciError(
            code,
            `registry ${this.registry} ${
              code === 'registry_unavailable' ? 'unreachable' : 'failing'
            }: ${what} failed ${attempt} times, last: ${(e as Error).message}`,
            { cause: e },
          );
        }
        const backoff = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1));
        const hinted = e instanceof RetriableStatus ? e.retryAfterMs : undefined;
        const delayMs = Math.round(
          hinted !== undefined ? Math.min(this.maxDelayMs, hinted) : backoff * (0.75 + Math.random() * 0.5),
        );
        this.opts.onRetry?.({ attempt, delayMs, reason: (e as Error).message });
        await sleep(delayMs, undefined, signal ? { signal } : undefined);
      }
    }
  }

  private authHeader(scope: string): string | undefined {
    const t = this.tokens.get(scope);
    if (t && t.expiresAt > Date.now()) return t.header;
    return this.basic;
  }

  /**
   * One authenticated request for `path` (relative to /v2/): on a 401 challenge it obtains
   * credentials for `scope` and tries once more. Retriable statuses become RetriableStatus.
   */
  private async request(
    path: string,
    scope: string,
    init: { method?: 'GET' | 'HEAD'; headers?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<HttpResponse> {
    const url = new URL(path, this.base);
    for (let round = 0; ; round++) {
      const auth = this.authHeader(scope);
      const res = await send(url, {
        method: init.method ?? 'GET',
        headers: { ...init.headers, ...(auth ? { authorization: auth } : {}) },
        // A blob's CDN redirect is held to what a token realm is: a hostile registry cannot send
        // the node to the metadata service, the host's own services or the private network.
        redirectRefusal: (next) => realmRefusal(this.base, next),
        addressRefusal: realmAddressRefusal,
        timeoutMs: this.timeoutMs,
        ...(init.signal ? { signal: init.signal } : {}),
      });
      if (res.status === 401 && round === 0) {
        const header = res.headers['www-authenticate'];
        drain(res);
        await this.authenticate(typeof header === 'string' ? header : '', scope, init.signal);
        continue;
      }
      await throwIfRetriable(res, `HTTP ${res.status} for ${url.pathname}`);
      return res;
    }
  }

  private async authenticate(header: string, scope: string, signal?: AbortSignal): Promise<void> {
    const challenges = parseChallenges(header);
    const bearer = challenges.find((c) => c.scheme === 'bearer');
    const creds = this.opts.credentials;
    if (bearer) {
      await this.fetchToken(bearer, scope, signal);
      return;
    }
    if (challenges.some((c) => c.scheme === 'basic')) {
      if (!creds || !('username' in creds)) {
        throw new OciError('unauthorized', `registry ${this.registry} requires credentials (basic auth)`);
      }
      this.basic = basicAuthHeader(creds);
      return;
    }
    throw new OciError(
      'unauthorized',
      `registry ${this.registry} refused the request with an unsupported challenge: ${header || '(none)'}`,
    );
  }

  /** The bearer-token flow of the distribution spec (GET realm with basic auth, or OAuth2 refresh token). */
  private async fetchToken(challenge: Challenge, scope: string, signal?: AbortSignal): Promise<void> {
    const realm = tokenRealm(this.registry, this.base, challenge);
    const req = tokenRequest(realm, challenge, scope, this.opts.credentials);
    const res = await this.retrying(
      'token request',
      async () => {
        const r = await send(req.url, {
          ...req.init,
          redirectRefusal: (next) => realmRefusal(this.base, next),
          addressRefusal: realmAddressRefusal,
          timeoutMs: this.timeoutMs,
          ...(signal ? { signal } : {}),
        });
        await throwIfRetriable(r, `token server ${realm.host}: HTTP ${r.status}`);
        return r;
      },
      signal,
    );
    if (res.status !== 200) throw await this.tokenRefusal(res, realm.host);
    const body = await readBody(res, TOKEN_LIMIT).catch((e: Error) => {
      throw badTokenResponse(realm.host, e);
    });
    this.tokens.set(scope, parseTokenResponse(realm.host, body, Date.now()));
  }

  private async tokenRefusal(res: HttpResponse, host: string): Promise<OciError> {
    const detail = await errorDetail(res);
    if (res.status === 401 || res.status === 403) {
      return new OciError(
        'unauthorized',
        `registry ${this.registry}: token server ${host} refused ${this.opts.credentials ? 'the credentials' : 'anonymous access'} (HTTP ${res.status}: ${detail})`,
      );
    }
    return new OciError('registry_error', `token server ${host}: HTTP ${res.status}: ${detail}`);
  }

  private async failure(res: HttpResponse, what: string, repository: string): Promise<OciError> {
    const detail = await errorDetail(res);
    if (res.status === 404) return new OciError('not_found', `${what} not found (${detail})`);
    if (res.status === 401 || res.status === 403) {
      return new OciError(
        'unauthorized',
        `access to ${this.registry}/${repository} denied${
          this.opts.credentials
            ? ' for the given credentials'
            : ' (no credentials given; the image may not exist or may be private)'
        }: ${detail}`,
      );
    }
    return new OciError('registry_error', `${what}: registry answered HTTP ${res.status}: ${detail}`);
  }

  /** GET of a small document (manifest, config) into memory, with its sha256. */
  private async getSmall(
    path: string,
    repository: string,
    what: string,
    limit: number,
    headers: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<FetchedManifest> {
    const res = await this.request(path, pullScope(repository), { headers, ...(signal ? { signal } : {}) });
    if (res.status !== 200) throw await this.failure(res, what, repository);
    const body = await readBody(res, limit).catch((e: Error) => {
      if (e instanceof NetworkError) throw e;
      throw new OciError('registry_error', `${what}: ${e.message}`);
    });
    const ct = res.headers['content-type'];
    return {
      body,
      contentType: typeof ct === 'string' ? ct : undefined,
      digest: `sha256:${createHash('sha256').update(body).digest('hex')}`,
    };
  }

  /** GET /v2/<repository>/manifests/<reference>; a digest reference is verified against the bytes. */
  async manifest(
    repository: string,
    reference: string,
    what: string,
    signal?: AbortSignal,
  ): Promise<FetchedManifest> {
    return this.retrying(
      `fetching the manifest of ${what}`,
      async () => {
        const m = await this.getSmall(
          `${repository}/manifests/${reference}`,
          repository,
          what,
          MANIFEST_LIMIT,
          { accept: MANIFEST_ACCEPT },
          signal,
        );
        if (reference.startsWith('sha256:') && m.digest !== reference) {
          throw new OciError(
            'digest_mismatch',
            `${what}: manifest bytes hash to ${m.digest}, not ${reference}`,
          );
        }
        return m;
      },
      signal,
    );
  }

  /** A small blob (an image config) in memory, verified. */
  async blobBytes(
    repository: string,
    digest: string,
    limit: number,
    what: string,
    signal?: AbortSignal,
  ): Promise<Buffer> {
    return this.retrying(
      `fetching ${what}`,
      async () => {
        const b = await this.getSmall(`${repository}/blobs/${digest}`, repository, what, limit, {}, signal);
        if (b.digest !== digest) {
          throw new OciError('digest_mismatch', `${what}: content hashes to ${b.digest}, not ${digest}`);
        }
        return b.body;
      },
      signal,
    );
  }

  /**
   * Downloads blob `digest` into `dest` (created, must not exist), resuming with a Range request
   * after a transport error. The file is deleted unless its size and sha256 match the descriptor.
   */
  async downloadBlob(
    repository: string,
    digest: string,
    size: number,
    dest: string,
    opts: BlobDownloadOptions,
  ): Promise<void> {
    const file = await BlobFile.create(dest, size, opts.what);
    let ok = false;
    try {
      await this.retrying(
        `downloading ${opts.what}`,
        () => this.downloadRest(repository, digest, file, opts),
        opts.signal,
      );
      await file.complete(digest, opts.sync ?? false);
      opts.onProgress?.({ done: file.done, total: size });
      ok = true;
    } finally {
      await file.close(ok);
    }
  }

  /** One GET of the blob's bytes `file` does not hold yet, written to it as they arrive. */
  private async downloadRest(
    repository: string,
    digest: string,
    file: BlobFile,
    opts: BlobDownloadOptions,
  ): Promise<void> {
    const res = await this.request(`${repository}/blobs/${digest}`, pullScope(repository), {
      headers: resumeHeaders(file.done),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    const range = String(res.headers['content-range'] ?? '');
    switch (resumeStep(file.done, res.status, range)) {
      case 'restart':
        await file.restart();
        break;
      case 'bad_range':
        drain(res);
        throw new OciError('registry_error', `${opts.what}: server answered a bad range (${range})`);
      case 'failed':
        throw await this.failure(res, opts.what, repository);
    }
    await file.receive(res.body, opts.onProgress);
  }
}
