import { answerJson, ask, callNode, type GatewayContext } from '../context.js';
import { comparator, decodeMergeToken, DomainError, type Listed } from '@agentenv/common';
import { queryOf, sendJson } from '../http.js';
import { mergedList, type NodePage } from '../list/fanout.js';
import type { NodeRef } from '../scheduler/scheduler.js';
import type { ClientRequest, ClientResponse, NodeAnswer } from '../upstream/node-http.js';
import { relay } from './sandbox.js';

/** A node's refusal of the list query (a bad filter): every node would say the same. */
class NodeRefused extends Error {
  constructor(readonly answer: NodeAnswer) {
    super(`node answered ${answer.status}`);
  }
}

/** The nodes a listing asks: every node that may answer (unhealthy ones are skipped). */
export async function listableNodes(ctx: GatewayContext): Promise<NodeRef[]> {
  const nodes = await ask(() => ctx.scheduler.listNodes());
  return nodes.map((n) => n.ref).filter((n) => n.status !== 'unhealthy');
}

/** Sorting as the node lists: `startedAt`, newest first unless the query asks `order=asc`. */
function orderOf(q: URLSearchParams): 'asc' | 'desc' {
  const o = q.get('order');
  if (o === null || o === 'desc') return 'desc';
  if (o === 'asc') return 'asc';
  throw new DomainError('invalid', 'order must be asc or desc');
}

/**
 * GET /v2/sandboxes (paged) and the legacy GET /sandboxes (all at once) over every node, merged
 * in the nodes' own order. Every query filter is passed to the nodes as it came; the gateway
 * owns only `limit` and `nextToken` (a token of every node's position).
 */
export async function handleList(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  v2: boolean,
): Promise<void> {
  const q = queryOf(req.url ?? '/');
  const compare = comparator('startedAt', orderOf(q));
  const nodes = await listableNodes(ctx);
  const byId = new Map(nodes.map((n) => [n.nodeId, n]));
  const onNodeError = (node: string, err: unknown) =>
    ctx.logger.warn({ node, err: (err as Error).message }, 'list: a node did not answer');
  try {
    if (!v2) {
      const all: Listed[] = [];
      await Promise.all(
        nodes.map(async (n) => {
          try {
            all.push(...(await page(ctx, req, n, '/sandboxes', q)).items);
          } catch (err) {
            if (err instanceof NodeRefused) throw err;
            onNodeError(n.nodeId, err);
          }
        }),
      );
      return sendJson(res, 200, all.sort(compare));
    }
    const limit = limitOf(q);
    const filters = new URLSearchParams(q);
    filters.delete('limit');
    filters.delete('nextToken');
    const { items, nextToken } = await mergedList({
      nodes: nodes.map((n) => n.nodeId),
      position: decodeMergeToken(q.get('nextToken') ?? undefined),
      limit,
      compare,
      fetch: (node, token, lim) => {
        const p = new URLSearchParams(filters);
        p.set('limit', String(lim));
        if (token) p.set('nextToken', token);
        return page(ctx, req, byId.get(node)!, '/v2/sandboxes', p);
      },
      onNodeError: (node, err) => {
        if (err instanceof NodeRefused) throw err;
        onNodeError(node, err);
      },
    });
    sendJson(res, 200, items, nextToken ? { 'x-next-token': nextToken } : {});
  } catch (err) {
    if (err instanceof NodeRefused) return relay(res, err.answer);
    throw err;
  }
}

function limitOf(q: URLSearchParams): number {
  const s = q.get('limit');
  if (s === null) return 100;
  const n = Number(s);
  if (!/^\d+$/.test(s) || n < 1 || n > 100) throw new DomainError('invalid', 'limit must be 1-100');
  return n;
}

async function page(
  ctx: GatewayContext,
  req: ClientRequest,
  node: NodeRef,
  path: string,
  q: URLSearchParams,
): Promise<NodePage> {
  const qs = q.toString();
  const a = await callNode(ctx, node, req, { method: 'GET', path: qs ? `${path}?${qs}` : path });
  if (a.status >= 400 && a.status < 500) throw new NodeRefused(a);
  if (a.status !== 200) throw new DomainError('bad_gateway', `node ${node.nodeId} answered ${a.status}`);
  const items = answerJson<Listed[]>(node, a);
  if (!Array.isArray(items)) throw new DomainError('bad_gateway', `node ${node.nodeId} listed no array`);
  const next = a.headers['x-next-token'];
  return { items, ...(typeof next === 'string' && next ? { next } : {}) };
}
