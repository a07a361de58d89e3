import { ask, type GatewayContext } from '../context.js';
import { DomainError } from '@agentenv/common';
import { sendJson } from '../http.js';
import type { ClusterEvent } from '../scheduler/scheduler.js';
import type { ClientRequest, ClientResponse } from '../upstream/node-http.js';

/** GET /nodes: every node the scheduler knows, as it reports them. */
export async function handleNodes(ctx: GatewayContext, res: ClientResponse): Promise<void> {
  const nodes = await ask(() => ctx.scheduler.listNodes());
  sendJson(
    res,
    200,
    nodes.map((n) => n.info),
  );
}

export async function handleNode(ctx: GatewayContext, res: ClientResponse, nodeId: string): Promise<void> {
  const n = await ask(() => ctx.scheduler.getNode(nodeId));
  if (!n) throw new DomainError('not_found', `node ${nodeId} not found`);
  sendJson(res, 200, n.info);
}

/** GET /sandboxes/{id}/events: the sandbox's lifecycle as the scheduler recorded it. */
export async function handleSandboxEvents(
  ctx: GatewayContext,
  res: ClientResponse,
  sandboxId: string,
): Promise<void> {
  const events = await ask(() => ctx.scheduler.sandboxEvents(sandboxId));
  if (events.length === 0 && !(await ask(() => ctx.scheduler.lookupNode(sandboxId))))
    throw new DomainError('not_found', `sandbox ${sandboxId} not found`);
  sendJson(res, 200, events);
}

/** Seconds between SSE comments that keep idle connections (and proxies) from timing out. */
const KEEPALIVE_MS = 15_000;

/**
 * GET /events (optionally `?sandboxID=`): the cluster's lifecycle events as server-sent events,
 * one `event: <type>` with a JSON `data:` line each, until the client goes away; a client that
 * stops reading is dropped (ctx.streams), as is one over the number of streams allowed (429).
 */
export async function handleEventStream(
  ctx: GatewayContext,
  res: ClientResponse,
  sandboxId: string | undefined,
): Promise<void> {
  ctx.streams.admit(apiKeyOf(res.req), res);
  const abort = new AbortController();
  res.once('close', () => abort.abort());
  const events = ctx.scheduler.watchEvents(abort.signal, sandboxId)[Symbol.asyncIterator]();
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
  const send = (text: string) => ctx.streams.write(res, text);
  send(': connected\n\n');
  const keepalive = setInterval(() => send(': keepalive\n\n'), KEEPALIVE_MS);
  const write = (e: ClusterEvent) => send(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
  try {
    for (let r = await events.next(); !r.done; r = await events.next()) write(r.value);
  } catch (err) {
    if (!abort.signal.aborted)
      send(`event: error\ndata: ${JSON.stringify({ message: (err as Error).message })}\n\n`);
  } finally {
    clearInterval(keepalive);
    res.end();
  }
}

/** The X-API-Key a request gave (checked before any handler runs). */
const apiKeyOf = (req: ClientRequest) => {
  const key = req.headers['x-api-key'];
  return typeof key === 'string' ? key : undefined;
};
