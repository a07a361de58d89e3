import { invalid } from './errors.js';

/**
 * The filters, order and pages of `GET /v2/sandboxes` (E2B's list), over listed sandboxes in
 * their wire form. Pure, so a node answers with it and the cluster gateway merges several
 * nodes' answers with the same rules: every node sorts by (startedAt, sandboxID) and a page
 * token is the sort key of the last sandbox handed out, so a node can continue any merged page.
 */

export type ListedState = 'running' | 'paused';
export type ListOrder = 'asc' | 'desc';

/** What the engine reads of a listed sandbox (E2B's ListedSandbox has more). */
export interface Listable {
  sandboxID: string;
  templateID: string;
  alias?: string;
  /** ISO-8601. */
  startedAt: string;
  state: ListedState;
  metadata?: Record<string, string>;
}

/** Where a page starts: after the sandbox with this sort key, in `order`. */
export interface PageCursor {
  startedAtMs: number;
  sandboxId: string;
  order: ListOrder;
}

export interface SandboxListQuery {
  states: ListedState[];
  metadata: Record<string, string>;
  template?: string;
  /** Unix milliseconds; sandboxes started at or after it. */
  startedAfterMs?: number;
  order: ListOrder;
  limit: number;
  cursor?: PageCursor;
}

/** The query string as the SDK and CLI send it (before validation). */
export interface RawListQuery {
  state?: string | string[];
  metadata?: string;
  template?: string;
  startedAfter?: string;
  order?: string;
  limit?: number;
  nextToken?: string;
}

export interface ListPage<T> {
  page: T[];
  /** For the `X-Next-Token` header; absent on the last page. */
  nextToken?: string;
  /** For `X-Total-Running`: running sandboxes matching the filters, before paging; only when running ones were asked for. */
  totalRunning?: number;
}

export const DEFAULT_LIST_LIMIT = 100;
export const MAX_LIST_LIMIT = 100;
const STATES: readonly ListedState[] = ['running', 'paused'];

export function encodePageCursor(c: PageCursor): string {
  return Buffer.from(JSON.stringify({ t: c.startedAtMs, id: c.sandboxId, o: c.order })).toString('base64url');
}

export function decodePageCursor(token: string): PageCursor {
  try {
    const v = JSON.parse(Buffer.from(token, 'base64url').toString()) as {
      t?: unknown;
      id?: unknown;
      o?: unknown;
    };
    if (
      typeof v.t === 'number' &&
      Number.isFinite(v.t) &&
      typeof v.id === 'string' &&
      (v.o === 'asc' || v.o === 'desc')
    )
      return { startedAtMs: v.t, sandboxId: v.id, order: v.o };
  } catch {
    // fall through
  }
  throw invalid('invalid nextToken');
}

/**
 * `metadata=`: `k=v&k2=v2` with each key and value URL-encoded once more by the SDK (the query
 * string's own encoding is already undone by the HTTP server).
 */
export function parseMetadataQuery(q: string | undefined): Record<string, string> {
  if (!q) return {};
  const out: Record<string, string> = {};
  try {
    for (const [k, v] of new URLSearchParams(q)) out[decodeURIComponent(k)] = decodeURIComponent(v);
  } catch {
    throw invalid(`invalid metadata query '${q}': keys and values must be URL-encoded`);
  }
  return out;
}

export function parseListQuery(raw: RawListQuery): SandboxListQuery {
  const stateList = (Array.isArray(raw.state) ? raw.state : raw.state ? [raw.state] : [])
    .flatMap((s) => s.split(','))
    .filter((s) => s !== '');
  for (const s of stateList) {
    if (!STATES.includes(s as ListedState)) throw invalid(`invalid state '${s}': must be running or paused`);
  }
  const order = raw.order ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw invalid(`invalid order '${order}': must be asc or desc`);
  let startedAfterMs: number | undefined;
  if (raw.startedAfter !== undefined) {
    startedAfterMs = Date.parse(raw.startedAfter);
    if (Number.isNaN(startedAfterMs))
      throw invalid(`invalid startedAfter '${raw.startedAfter}': must be an ISO-8601 date-time`);
  }
  const limit = raw.limit ?? DEFAULT_LIST_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT)
    throw invalid(`invalid limit ${limit}: must be 1-${MAX_LIST_LIMIT}`);
  const cursor = raw.nextToken ? decodePageCursor(raw.nextToken) : undefined;
  if (cursor && cursor.order !== order) throw invalid('invalid nextToken: it was made for the other order');
  return {
    states: stateList.length ? [...new Set(stateList as ListedState[])] : [...STATES],
    metadata: parseMetadataQuery(raw.metadata),
    ...(raw.template ? { template: raw.template } : {}),
    ...(startedAfterMs !== undefined ? { startedAfterMs } : {}),
    order,
    limit,
    ...(cursor ? { cursor } : {}),
  };
}

/** The filters: state, metadata (every pair), template id or name, start time. */
export function matchesListQuery(s: Listable, q: SandboxListQuery): boolean {
  if (!q.states.includes(s.state)) return false;
  const meta = s.metadata ?? {};
  if (!Object.entries(q.metadata).every(([k, v]) => meta[k] === v)) return false;
  if (q.template !== undefined && q.template !== s.templateID && q.template !== s.alias) return false;
  if (q.startedAfterMs !== undefined && Date.parse(s.startedAt) < q.startedAfterMs) return false;
  return true;
}

const keyOf = (s: Listable) => ({ t: Date.parse(s.startedAt), id: s.sandboxID });

/** Start time, then id, ascending or descending: a total order every node agrees on. */
export function compareListed(order: ListOrder): (a: Listable, b: Listable) => number {
  const sign = order === 'asc' ? 1 : -1;
  return (a, b) => {
    const x = keyOf(a);
    const y = keyOf(b);
    return sign * (x.t - y.t || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  };
}

function afterCursor(s: Listable, c: PageCursor): boolean {
  const { t, id } = keyOf(s);
  const d = t - c.startedAtMs || (id < c.sandboxId ? -1 : id > c.sandboxId ? 1 : 0);
  return c.order === 'asc' ? d > 0 : d < 0;
}

function cut<T extends Listable>(sorted: T[], q: SandboxListQuery, more: boolean): ListPage<T> {
  const page = sorted.slice(0, q.limit);
  const last = page[page.length - 1];
  if (!last || !(more || sorted.length > q.limit)) return { page };
  const k = keyOf(last);
  return { page, nextToken: encodePageCursor({ startedAtMs: k.t, sandboxId: k.id, order: q.order }) };
}

/** One page of `items` (a node's sandboxes) for the query. */
export function queryPage<T extends Listable>(items: readonly T[], q: SandboxListQuery): ListPage<T> {
  const matching = items.filter((s) => matchesListQuery(s, q));
  const sorted = matching.filter((s) => !q.cursor || afterCursor(s, q.cursor)).sort(compareListed(q.order));
  const result = cut(sorted, q, false);
  if (q.states.includes('running'))
    result.totalRunning = matching.filter((s) => s.state === 'running').length;
  return result;
}
