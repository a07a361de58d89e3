import { ask, type GatewayContext } from '../context.js';
import { DomainError } from '@agentenv/common';
import { sendJson } from '../http.js';
import type { ClusterEvent } from '../scheduler/scheduler.js';
import type { ClientResponse } from '../upstream/node-http.js';

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
 * one `event: <type>` with a JSON `data:` line each, until the client goes away.
 */
export async function handleEventStream(
  ctx: GatewayContext,
  res: ClientResponse,
  sandboxId: string | undefined,
): Promise<void> {
  const abort = new AbortController();
  res.once('close', () => abort.abort());
  const events = ctx.scheduler.watchEvents(abort.signal, sandboxId)[Symbol.asyncIterator]();
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
  res.write(': connected\n\n');
  const keepalive = setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS);
  const write = (e: ClusterEvent) => res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
  try {
    for (let r = await events.next(); !r.done; r = await events.next()) write(r.value);
  } catch (err) {
    if (!abort.signal.aborted)
      res.write(`event: error\ndata: ${JSON.stringify({ message: (err as Error).message })}\n\n`);
  } finally {
    clearInterval(keepalive);
    res.end();
  }
}
