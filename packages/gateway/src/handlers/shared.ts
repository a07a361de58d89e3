import { answerJson, callNode, type GatewayContext } from '../context.js';
import { DomainError } from '@agentenv/common';
import { readBody } from '../http.js';
import type { ControlRoute } from '../routing/classify.js';
import type { NodeRef } from '../scheduler/scheduler.js';
import type { ClientRequest, ClientResponse } from '../upstream/node-http.js';
import { listableNodes } from './list.js';
import { relay } from './sandbox.js';

let turn = 0;

/** A ready node, taking turns; draining ones only when no node is ready. */
async function someNode(ctx: GatewayContext, preferred?: string): Promise<NodeRef> {
  const nodes = await listableNodes(ctx);
  const pick = nodes.find((n) => n.nodeId === preferred);
  if (pick) return pick;
  const ready = nodes.filter((n) => n.status === 'ready');
  const pool = ready.length ? ready : nodes;
  if (!pool.length) throw new DomainError('unavailable', 'no healthy node in the cluster', 5);
  return pool[turn++ % pool.length]!;
}

/** Snapshots, the template catalogue, …: the shared repository answers through any node. */
export async function handleAnyNode(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
): Promise<void> {
  await ctx.nodes.stream(await someNode(ctx), req, res, {
    tls: ctx.tls,
    headerTimeoutMs: ctx.startTimeoutMs,
  });
}

/**
 * Template builds: a build is registered, fed its files and run on one node, so its calls go to
 * the node that registered it (remembered from the registration's answer).
 */
export async function handleTemplate(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  route: Extract<ControlRoute, { kind: 'template' }>,
): Promise<void> {
  if (!route.register) {
    const node = await someNode(ctx, route.templateId ? ctx.templates.nodeOf(route.templateId) : undefined);
    return ctx.nodes.stream(node, req, res, { tls: ctx.tls, headerTimeoutMs: ctx.startTimeoutMs });
  }
  const node = await someNode(ctx);
  const answer = await callNode(ctx, node, req, { body: await readBody(req) });
  if (answer.status < 300) {
    const { templateID } = answerJson<{ templateID?: unknown }>(node, answer);
    if (typeof templateID === 'string') ctx.templates.remember(templateID, node.nodeId);
  }
  relay(res, answer);
}
