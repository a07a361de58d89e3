import { DomainError } from '@agentenv/common';
import { answerJson, callNode, type GatewayContext } from '../context.js';
import { sendJson } from '../http.js';
import type { NodeRef } from '../scheduler/scheduler.js';
import type { ClientRequest, ClientResponse, NodeAnswer } from '../upstream/node-http.js';
import { listableNodes } from './list.js';
import { relay } from './sandbox.js';

/**
 * Volumes live on the node that created them (docs/cluster.md), or on every node that shares
 * one volume root. The gateway keeps no map of them: it asks the nodes, with the caller's own
 * credentials, so it learns nothing the caller could not.
 */
interface ListedVolume {
  volumeID: string;
  name: string;
}

/** Each node's answer to GET `path` with the caller's headers; a node that fails is left out. */
async function askEach(
  ctx: GatewayContext,
  req: ClientRequest,
  path: string,
): Promise<{ node: NodeRef; answer: NodeAnswer }[]> {
  const nodes = await listableNodes(ctx);
  const answers = await Promise.all(
    nodes.map(async (node) => {
      try {
        return { node, answer: await callNode(ctx, node, req, { method: 'GET', path }) };
      } catch (err) {
        ctx.logger.warn({ node: node.nodeId, err: (err as Error).message }, 'volumes: a node did not answer');
        return undefined;
      }
    }),
  );
  return answers.filter((a) => a !== undefined);
}

/** Every node's volumes, each volume once (nodes sharing a volume root list the same ones). */
async function volumesOfNodes(ctx: GatewayContext, req: ClientRequest): Promise<Map<ListedVolume, string[]>> {
  const byId = new Map<string, { volume: ListedVolume; nodes: string[] }>();
  for (const { node, answer } of await askEach(ctx, req, '/volumes')) {
    if (answer.status !== 200) continue;
    const listed = answerJson<ListedVolume[]>(node, answer);
    if (!Array.isArray(listed)) throw new DomainError('bad_gateway', `node ${node.nodeId} listed no array`);
    for (const v of listed) {
      const entry = byId.get(v.volumeID) ?? { volume: v, nodes: [] };
      entry.nodes.push(node.nodeId);
      byId.set(v.volumeID, entry);
    }
  }
  return new Map([...byId.values()].map((e) => [e.volume, e.nodes]));
}

/** GET /volumes: the volumes of every node, merged. */
export async function handleVolumeList(ctx: GatewayContext, req: ClientRequest, res: ClientResponse) {
  const volumes = await volumesOfNodes(ctx, req);
  sendJson(res, 200, [...volumes.keys()]);
}

/**
 * A call on one volume (GET/DELETE /volumes/{id}, the content API): streamed to the node that
 * answers `probe` (a cheap GET of the same volume, as the caller is allowed it) with 200. When
 * none does, the caller gets a node's refusal of the probe (404, or 401 for a content call), or
 * a 404 when no node answered at all.
 */
export async function handleVolumeCall(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  probe: string,
): Promise<void> {
  const answers = await askEach(ctx, req, probe);
  const holder = answers.find((a) => a.answer.status === 200);
  if (holder)
    return ctx.nodes.stream(holder.node, req, res, { tls: ctx.tls, headerTimeoutMs: ctx.startTimeoutMs });
  const refusal = answers.find((a) => a.answer.status >= 400 && a.answer.status < 500);
  if (refusal) return relay(res, refusal.answer);
  throw new DomainError('not_found', 'the volume is on no node that answered');
}

/**
 * The nodes a create with `volumeMounts` may be placed on: those that hold every volume it
 * names (undefined when it names none). Refused with 400 when a volume is on no node, or when
 * no node holds all of them.
 */
export async function nodesForVolumes(
  ctx: GatewayContext,
  req: ClientRequest,
  body: Record<string, unknown>,
): Promise<string[] | undefined> {
  const mounts = body.volumeMounts;
  if (!Array.isArray(mounts) || mounts.length === 0) return undefined;
  const names = [...new Set(mounts.map((m: { name?: unknown }) => m?.name))];
  if (!names.every((n): n is string => typeof n === 'string'))
    throw new DomainError('invalid', 'each volume mount needs a name');
  const volumes = await volumesOfNodes(ctx, req);
  const holders = names.map((name) => {
    const found = [...volumes].filter(([v]) => v.name === name).flatMap(([, nodes]) => nodes);
    if (!found.length) throw new DomainError('invalid', `volume ${name} not found on any node`);
    return { name, nodes: found };
  });
  const common = holders.reduce((acc, h) => acc.filter((n) => h.nodes.includes(n)), holders[0]!.nodes);
  if (!common.length) {
    const where = holders.map((h) => `${h.name} on ${h.nodes.join(', ')}`).join('; ');
    throw new DomainError(
      'invalid',
      `no node holds all of these volumes (${where}): a sandbox mounts volumes of its own node only`,
    );
  }
  return common;
}
