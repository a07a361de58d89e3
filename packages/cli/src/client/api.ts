import type { ResolvedCredentials } from '../config/credentials.js';
import { CliError } from '../errors.js';

export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  /** What the request is about, for messages like "this server does not support <feature>". */
  feature?: string;
  signal?: AbortSignal;
}

export interface ApiResponse<T> {
  status: number;
  headers: Headers;
  data: T;
}

/** A non-2xx answer of the REST API, with the `{code, message}` body E2B defines. */
export class ApiError extends CliError {
  constructor(
    readonly status: number,
    message: string,
    hint?: string,
  ) {
    super(message, 1, hint);
    this.name = 'ApiError';
  }
}

/** Turns an error answer into the message shown to the user. */
export function apiErrorFor(
  status: number,
  body: unknown,
  ctx: { method: string; path: string; url: string; feature?: string },
): ApiError {
  const serverMessage =
    body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string'
      ? (body as { message: string }).message
      : typeof body === 'string' && body.trim()
        ? body.trim().slice(0, 300)
        : '';
  if (status === 401 || status === 403) {
    return new ApiError(
      status,
      `authentication failed: ${ctx.url} rejected the API key${serverMessage ? ` (${serverMessage})` : ''}`,
      'Run `aenv auth` with a valid key (or set AENV_API_KEY).',
    );
  }
  const unsupported =
    status === 501 || status === 405 || (status === 404 && serverMessage.startsWith('no route for'));
  if (unsupported) {
    return new ApiError(
      status,
      `this server does not support ${ctx.feature ?? `${ctx.method} ${ctx.path}`} yet (HTTP ${status}${serverMessage ? `: ${serverMessage}` : ''})`,
    );
  }
  if (status === 429)
    return new ApiError(status, `rate limited by the server: ${serverMessage || 'retry later'}`);
  return new ApiError(status, serverMessage || `HTTP ${status} from ${ctx.method} ${ctx.path}`);
}

function networkMessage(err: unknown, url: string): CliError {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const why = cause?.code ?? cause?.message ?? (err as Error).message;
  return new CliError(
    `cannot reach the AgentENV server at ${url}: ${why}`,
    1,
    'Check the URL (`aenv auth --show`) and that aenv-server is running.',
  );
}

/** The REST client: JSON in and out, `X-API-Key` on every request. */
export class ApiClient {
  constructor(readonly creds: ResolvedCredentials) {}

  get baseUrl(): string {
    return this.creds.url;
  }

  url(path: string, query?: RequestOptions['query']): string {
    const u = new URL(this.creds.url + path);
    for (const [k, v] of Object.entries(query ?? {}))
      if (v !== undefined && v !== '') u.searchParams.set(k, String(v));
    return u.toString();
  }

  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse<T>> {
    const url = this.url(path, opts.query);
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: {
          'x-api-key': this.creds.apiKey,
          accept: 'application/json',
          ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    } catch (err) {
      if ((err as Error).name === 'AbortError' || (err as Error).name === 'TimeoutError') throw err;
      throw networkMessage(err, this.creds.url);
    }
    const text = await res.text();
    let data: unknown = undefined;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = text;
      }
    }
    if (!res.ok) {
      throw apiErrorFor(res.status, data, {
        method,
        path,
        url: this.creds.url,
        ...(opts.feature ? { feature: opts.feature } : {}),
      });
    }
    return { status: res.status, headers: res.headers, data: data as T };
  }

  async get<T>(path: string, opts?: RequestOptions): Promise<T> {
    return (await this.request<T>('GET', path, opts)).data;
  }

  async post<T>(path: string, body?: unknown, opts?: RequestOptions): Promise<ApiResponse<T>> {
    return this.request<T>('POST', path, { ...opts, body: body ?? {} });
  }

  async delete(path: string, opts?: RequestOptions): Promise<void> {
    await this.request('DELETE', path, opts);
  }

  /** Follows `x-next-token` pages until `max` items (or all). */
  async list<T>(
    path: string,
    query: RequestOptions['query'],
    max = Infinity,
    feature?: string,
  ): Promise<T[]> {
    const out: T[] = [];
    let nextToken: string | undefined;
    do {
      const limit = Math.min(100, max - out.length);
      const res = await this.request<T[]>('GET', path, {
        query: { ...query, limit, nextToken },
        ...(feature ? { feature } : {}),
      });
      if (!Array.isArray(res.data)) throw new CliError(`unexpected answer from GET ${path}: not a list`);
      out.push(...res.data);
      nextToken = res.headers.get('x-next-token') ?? undefined;
    } while (nextToken && out.length < max);
    return out;
  }
}
