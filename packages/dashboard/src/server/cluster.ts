import type { IncomingMessage, ServerResponse } from 'node:http';
import { EventStreamParser, formatEvent } from '../shared/sse.js';
import type { Catalog, SandboxEvent, SandboxPage, Summary } from '../shared/types.js';
import { DASHBOARD_API_PATH, DashboardAssets } from './assets.js';
import { askAll, forwardedHeaders, type ClusterNode } from './fanout.js';
import { dashboardPageHandler } from './http.js';
import { mergeCatalogs, mergePages, mergeSummaries } from './merge.js';

export type { ClusterNode } from './fanout.js';

export interface ClusterDashboardOptions {
  /** The nodes to ask now (the gateway: every node the scheduler knows that is not unhealthy). */
  nodes: () => Promise<ClusterNode[]>;
  /** Throws when the request may not read the API (the gateway's own X-API-Key check). */
  authorize: (req: IncomingMessage) => void;
  fetch?: typeof fetch;
  log?: (message: string, err?: unknown) => void;
}

/** Node rows a merged page may need: deeper pages are refused rather than fetched from every node. */
const MAX_DEPTH = 5000;
const NODE_PAGE = 100;
const KEEPALIVE_MS = 15_000;
const RELAY_RETRY_MS = [1000, 2000, 5000, 10_000];
/** How often an open stream looks for nodes that joined or left. */
const MEMBERSHIP_MS = 10_000;

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
 * node answers, each asked of every node and merged (counts added, pages merged newest first,
 * one catalogue, one event stream relaying every node's). Returns a handler that answers
 * dashboard paths (true) and leaves every other request alone (false).
 */
export function clusterDashboardHandler(o: ClusterDashboardOptions) {
  const pages = dashboardPageHandler(DashboardAssets.load());
  const log = o.log ?? (() => undefined);
  const fetchImpl = o.fetch ?? fetch;

  const fromAll = async <T>(req: IncomingMessage, path: string) => {
    const results = await askAll<T>(await o.nodes(), path, forwardedHeaders(req.headers), fetchImpl);
    for (const r of results) if (!r.ok && r.status !== 404) log(`dashboard: ${r.node.nodeID}: ${r.message}`);
    // A refused key is refused by every node alike: the client hears it.
    const refused = results.find((r) => !r.ok && r.status === 401);
    if (refused && !refused.ok) throw new HttpError(401, refused.message);
    return results;
  };
  const bodies = <T>(results: Awaited<ReturnType<typeof askAll<T>>>) =>
    results.flatMap((r) => (r.ok ? [r.body] : []));

  const api = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const route = url.pathname.slice(DASHBOARD_API_PATH.length);
    if (route === '/summary')
      return sendJson(
        res,
        200,
        mergeSummaries(bodies(await fromAll<Summary>(req, url.pathname)), Date.now()),
      );
    if (route === '/catalog')
      return sendJson(res, 200, mergeCatalogs(bodies(await fromAll<Catalog>(req, url.pathname))));
    if (route === '/sandboxes') return sendJson(res, 200, await sandboxPage(req, url));
    if (route === '/stream') return stream(req, res, url);
    const events = /^\/sandboxes\/([a-z0-9]{1,64})\/events$/.exec(route);
    if (events) {
      const results = await fromAll<SandboxEvent[]>(req, url.pathname);
      const found = results.find((r) => r.ok);
      if (!found || !found.ok) throw new HttpError(404, `sandbox ${events[1]} not found`);
      return sendJson(res, 200, found.body);
    }
    throw new HttpError(404, `no route for GET ${url.pathname}`);
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
      const got = bodies(await fromAll<SandboxPage>(req, `${url.pathname}?${q}`));
      // Totals count once: from the first round.
      parts.push(...got.map((p) => (at === 0 ? p : { ...p, total: 0 })));
      if (got.every((p) => p.items.length < NODE_PAGE)) break;
    }
    return mergePages(parts, offset, limit);
  };

  const stream = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const abort = new AbortController();
    const relays = new Map<string, AbortController>();
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    const send = (event: string, data: string) => res.write(`event: ${event}\ndata: ${data}\n\n`);
    const relay = async (node: ClusterNode, signal: AbortSignal) => {
      for (let attempt = 0; !signal.aborted; attempt++) {
        try {
          const r = await fetchImpl(new URL(`${url.pathname}${url.search}`, node.url), {
            headers: forwardedHeaders(req.headers),
            signal,
          });
          if (r.ok && r.body) {
            attempt = 0;
            const parser = new EventStreamParser();
            const decoder = new TextDecoder();
            for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>)
              for (const e of parser.push(decoder.decode(chunk, { stream: true })))
                if (e.event !== 'hello') send(e.event, e.data);
          } else await r.body?.cancel();
        } catch (err) {
          if (!signal.aborted) log(`dashboard: stream of ${node.nodeID} dropped`, err);
        }
        if (signal.aborted) return;
        await new Promise((resolve) =>
          setTimeout(resolve, RELAY_RETRY_MS[Math.min(attempt, RELAY_RETRY_MS.length - 1)]),
        );
      }
    };
    const follow = async () => {
      const nodes = await o.nodes().catch(() => [] as ClusterNode[]);
      const ids = new Set(nodes.map((n) => n.nodeID));
      for (const [id, c] of relays) {
        if (ids.has(id)) continue;
        c.abort();
        relays.delete(id);
      }
      for (const n of nodes) {
        if (relays.has(n.nodeID) || abort.signal.aborted) continue;
        const c = new AbortController();
        relays.set(n.nodeID, c);
        void relay(n, AbortSignal.any([abort.signal, c.signal]));
      }
      return nodes;
    };
    const nodes = await follow();
    res.write(formatEvent('hello', { nodeIDs: nodes.map((n) => n.nodeID), now: Date.now() }));
    const timers = [
      setInterval(() => void follow(), MEMBERSHIP_MS),
      setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS),
    ];
    res.once('close', () => {
      abort.abort();
      for (const t of timers) clearInterval(t);
    });
  };

  return (req: IncomingMessage, res: ServerResponse): boolean => {
    if (pages(req, res)) return true;
    const url = new URL(req.url ?? '/', 'http://gateway');
    if (url.pathname !== DASHBOARD_API_PATH && !url.pathname.startsWith(`${DASHBOARD_API_PATH}/`))
      return false;
    void (async () => {
      try {
        try {
          o.authorize(req);
        } catch (err) {
          throw new HttpError(401, (err as Error).message);
        }
        if (req.method !== 'GET') throw new HttpError(405, `${req.method} is not allowed on ${url.pathname}`);
        await api(req, res, url);
      } catch (err) {
        const status = err instanceof HttpError ? err.status : 502;
        if (!(err instanceof HttpError)) log('dashboard: request failed', err);
        if (!res.headersSent) sendJson(res, status, { code: status, message: (err as Error).message });
        else res.end();
      }
    })();
    return true;
  };
}
