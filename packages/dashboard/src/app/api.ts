import { toSandboxEvent } from '../shared/events.js';
import { redactSecrets } from '../shared/redact.js';
import type {
  Catalog,
  ListedSandbox,
  SandboxEvent,
  SandboxMetric,
  SandboxPage,
  Summary,
} from '../shared/types.js';
import { session } from './session.js';

/** An API answer other than 2xx: the server's `{code, message}`, or what went wrong on the way. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** What a wrong or missing key looks like to a person. */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 401) return `Not signed in: ${err.message}`;
    return err.status ? `${err.message} (HTTP ${err.status})` : err.message;
  }
  return (err as Error)?.message ?? String(err);
}

/**
 * Every call the app makes goes through here, to the same public API the SDKs use, with the
 * API key as `X-API-Key`. Bodies are stripped of secret-named fields before anything sees them.
 */
export async function call<T>(method: string, path: string, body?: unknown, key = session.get()): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers: {
        ...(key ? { 'x-api-key': key } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      cache: 'no-store',
    });
  } catch (err) {
    throw new ApiError(0, `the server did not answer: ${(err as Error).message}`);
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const message =
      (json as { message?: string } | undefined)?.message ?? (text.slice(0, 200) || res.statusText);
    throw new ApiError(res.status, message);
  }
  return redactSecrets(json) as T;
}

const q = (params: Record<string, string | number | undefined>) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') s.set(k, String(v));
  const str = s.toString();
  return str ? `?${str}` : '';
};

export interface SandboxFilter {
  state?: string;
  template?: string;
  q?: string;
  metadata?: string;
}

export interface SandboxDetail extends ListedSandbox {
  envdVersion?: string;
  allowInternetAccess?: boolean;
  network?: { allowOut?: string[]; denyOut?: string[]; allowPublicTraffic?: boolean };
  lifecycle?: { onTimeout?: string; autoResume?: boolean };
}

export interface SnapshotBody {
  snapshotID: string;
  names: string[];
  sandboxID: string;
  templateID: string;
  cpuCount: number;
  memoryMB: number;
  createdAt: string;
}

export interface TemplateBody {
  templateID: string;
  buildID: string;
  buildStatus: string;
  names: string[];
  aliases: string[];
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  createdAt: string;
  updatedAt: string;
  builds?: { buildID: string; status: string; createdAt: string; updatedAt: string }[];
}

export interface BuildStatusBody {
  status: string;
  logEntries: { timestamp: string; level: string; message: string }[];
  reason?: { message: string; step?: string };
}

export interface LogsBody {
  logs: { timestamp: string; line: string }[];
}

export const api = {
  /** Any authenticated call will do to check a key; GET /nodes is cheap on a node and a gateway. */
  checkKey: (key: string) => call<unknown[]>('GET', '/nodes', undefined, key),
  nodes: () => call<Record<string, unknown>[]>('GET', '/nodes'),
  summary: () => call<Summary>('GET', '/dashboard/api/summary'),
  sandboxes: (f: SandboxFilter, offset: number, limit: number) =>
    call<SandboxPage>('GET', `/dashboard/api/sandboxes${q({ ...f, offset, limit })}`),
  sandbox: (id: string) => call<SandboxDetail>('GET', `/sandboxes/${encodeURIComponent(id)}`),
  /** Its lifecycle events, oldest first: the node's own, or on a gateway the cluster's. */
  events: async (id: string): Promise<SandboxEvent[]> => {
    try {
      const raw = await call<Record<string, unknown>[]>('GET', `/sandboxes/${encodeURIComponent(id)}/events`);
      return raw.map(toSandboxEvent);
    } catch (err) {
      // A sandbox nothing was recorded for (records older than the node's start) has none.
      if (err instanceof ApiError && err.status === 404) return [];
      throw err;
    }
  },
  /** The node's recent samples of the sandbox's usage (E2B's metrics body). */
  metrics: (id: string) => call<SandboxMetric[]>('GET', `/sandboxes/${encodeURIComponent(id)}/metrics`),
  logs: (id: string) => call<LogsBody>('GET', `/sandboxes/${encodeURIComponent(id)}/logs`),
  pause: (id: string) => call<void>('POST', `/sandboxes/${encodeURIComponent(id)}/pause`),
  resume: (id: string) => call<unknown>('POST', `/sandboxes/${encodeURIComponent(id)}/connect`, {}),
  kill: (id: string) => call<void>('DELETE', `/sandboxes/${encodeURIComponent(id)}`),
  snapshot: (id: string, name?: string) =>
    call<SnapshotBody>('POST', `/sandboxes/${encodeURIComponent(id)}/snapshots`, name ? { name } : {}),
  setTimeout: (id: string, secs: number) =>
    call<void>('POST', `/sandboxes/${encodeURIComponent(id)}/timeout`, { timeout: secs }),
  catalog: () => call<Catalog>('GET', '/dashboard/api/catalog'),
  snapshots: () => call<SnapshotBody[]>('GET', '/snapshots'),
  templates: () => call<TemplateBody[]>('GET', '/templates'),
  template: (id: string) => call<TemplateBody>('GET', `/templates/${encodeURIComponent(id)}`),
  buildStatus: (templateID: string, buildID: string, logsOffset: number) =>
    call<BuildStatusBody>(
      'GET',
      `/templates/${encodeURIComponent(templateID)}/builds/${encodeURIComponent(buildID)}/status${q({ logsOffset })}`,
    ),
};
