import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Catalog, SandboxPage, Summary } from '../shared/types.js';
import { DASHBOARD_API_PATH, DashboardAssets } from './assets.js';
import { clusterStream, type StreamGate } from './cluster-stream.js';
import { askable, askAll, forwardedHeaders, type ClusterNode } from './fanout.js';
import { dashboardPageHandler } from './http.js';
import { mergeCatalogs, mergePages, mergeSummaries } from './merge.js';

export type { ClusterNode } from './fanout.js';

export interface ClusterDashboardOptions {
  /** Every node the cluster knows (a gateway: the scheduler's list). */
  nodes: () => Promise<ClusterNode[]>;
  /** The cluster's lifecycle events as they happen, until `signal` aborts (a gateway: the scheduler's). */
  events: (signal: AbortSignal, sandboxID?: string) => AsyncIterable<object>;
  /** Throws when the request may not read the API (the gateway's own X-API-Key check). */
  authorize: (req: IncomingMessage) => void;
  /** The server's open event streams: the stream's admission and its bounded writes. */
  streams: StreamGate;
  /** Answers an error thrown by `authorize`, `nodes`, `events` or `streams` as the gateway answers it. */
  sendError: (res: ServerResponse, err: unknown) => void;
  fetch?: typeof fetch;
  log?: (message: string, err?: unknown) => void;
}

/** Node rows a merged page may need: deeper pages are refused rather than fetched from every node. */
const MAX_DEPTH = 5000;
const NODE_PAGE = 100;

/** A refusal of the dashboard's own (bad paging, no such route), as `{code, message}`. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(text);
}

/**
 * The dashboard for a gateway, without Fastify: its pages, and the same /dashboard/api routes a
 * node answers, each asked of every ready or draining node and merged (counts added, pages
 * merged newest first, one catalogue), and one event stream (see clusterStream). Everything
 * else the app reads (GET /nodes, a sandbox, its events, its logs, actions) is the gateway's
 * public API. Returns a handler that answers dashboard paths (true) and leaves every other
 * request alone (false).
 */
export function clusterDashboardHandler(o: ClusterDashboardOptions) {
  const pages = dashboardPageHandler(DashboardAssets.load());
  const log = o.log ?? (() => undefined);
  const fetchImpl = o.fetch ?? fetch;

  /**
   * Every askable node's answer to `path`. Nodes that fail are left out (and logged); when all
   * fail, the client hears the first one's refusal (bad input is refused alike by every node)
   * or a 502.
   */
  const fromAll = async <T>(req: IncomingMessage, path: string): Promise<T[]> => {
    const results = await askAll<T>(askable(await o.nodes()), path, forwardedHeaders(req.headers), fetchImpl);
    const bodies = results.flatMap((r) => (r.ok ? [r.body] : []));
    const failed = results.flatMap((r) => (r.ok ? [] : [r]));
    for (const r of failed) log(`dashboard: ${r.node.nodeID}: ${r.message}`);
    if (failed.length && !bodies.length) {
      const first = failed[0]!;
      throw new HttpError(first.status < 500 ? first.status : 502, first.message);
    }
    return bodies;
  };

  const sandboxPage = async (req: IncomingMessage, url: URL): Promise<SandboxPage> => {
    const offset = Number(url.searchParams.get('offset') ?? 0);
    const limit = Number(url.searchParams.get('limit') ?? 25);
    if (!Number.isInteger(offset) || offset < 0 || !Number.isInteger(limit) || limit < 1 || limit > 100)
      throw new HttpError(400, 'offset must be >= 0 and limit between 1 and 100');
    if (offset + limit > MAX_DEPTH)
      throw new HttpError(400, `a cluster lists at most ${MAX_DEPTH} sandboxes deep; filter instead`);
    // Each node's first offset+limit rows, in pages of 100: the merged page is among them.
    const parts: SandboxPage[] = [];
    for (let at = 0; at < offset + limit; at += NODE_PAGE) {
      const q = new URLSearchParams(url.searchParams);
      q.set('offset', String(at));
      q.set('limit', String(Math.min(NODE_PAGE, offset + limit - at)));
      const got = await fromAll<SandboxPage>(req, `${url.pathname}?${q}`);
      // Totals count once: from the first round.
      parts.push(...got.map((p) => (at === 0 ? p : { ...p, total: 0 })));
      if (got.every((p) => p.items.length < NODE_PAGE)) break;
    }
    return mergePages(parts, offset, limit);
  };

  const api = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const route = url.pathname.slice(DASHBOARD_API_PATH.length);
    if (route === '/summary')
      return sendJson(res, 200, mergeSummaries(await fromAll<Summary>(req, url.pathname), Date.now()));
    if (route === '/catalog')
      return sendJson(res, 200, mergeCatalogs(await fromAll<Catalog>(req, url.pathname)));
    if (route === '/sandboxes') return sendJson(res, 200, await sandboxPage(req, url));
    if (route === '/stream')
      return clusterStream(
        { nodes: o.nodes, events: o.events, fetch: fetchImpl, log, streams: o.streams },
        req,
        res,
        url,
      );
    throw new HttpError(404, `no route for GET ${url.pathname}`);
  };

  return (req: IncomingMessage, res: ServerResponse): boolean => {
    if (pages(req, res)) return true;
    const pathname = (req.url ?? '/').split('?')[0]!;
    if (pathname !== DASHBOARD_API_PATH && !pathname.startsWith(`${DASHBOARD_API_PATH}/`)) return false;
    // Parsed on a fixed origin: a target that is no URL of its own (`//`) cannot make this throw.
    const url = new URL(`http://gateway${req.url ?? '/'}`);
    void (async () => {
      try {
        o.authorize(req);
        if (req.method !== 'GET') throw new HttpError(405, `${req.method} is not allowed on ${url.pathname}`);
        await api(req, res, url);
      } catch (err) {
        if (res.headersSent) res.end();
        else if (err instanceof HttpError)
          sendJson(res, err.status, { code: err.status, message: err.message });
        else o.sendError(res, err);
      }
    })();
    return true;
  };
}
