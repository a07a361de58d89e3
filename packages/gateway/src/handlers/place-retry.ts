import { answerJson, ask, isCapacityRefusal, type GatewayContext } from '../context.js';
import { DomainError } from '@agentenv/common';
import { PlacementRefused, type NodeRef, type PlacementHint } from '../scheduler/scheduler.js';
import type { NodeAnswer } from '../upstream/node-http.js';

/** Nodes tried for one placement before the gateway gives up with 429. */
const MAX_ATTEMPTS = 3;

/**
 * Places work that starts a sandbox (create, resume elsewhere, a fork child's spill): asks the
 * scheduler for a node, sends the work there and records the sandbox's node. A node that is full
 * or unreachable before it answered, or that failed to start the sandbox, is left out and the
 * next placement tried; any other answer (a 400, a 404) is the client's. When every node tried
 * was full or failed the answer is 429 with Retry-After, never a 5xx.
 */
export async function placeAndSend(
  ctx: GatewayContext,
  hint: PlacementHint,
  send: (node: NodeRef) => Promise<NodeAnswer>,
): Promise<{ node: NodeRef; answer: NodeAnswer }> {
  const exclude = [...(hint.excludeNodes ?? [])];
  let retryAfter = 5;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    let placement;
    try {
      placement = await ask(() => ctx.scheduler.schedule({ ...hint, excludeNodes: exclude }));
    } catch (err) {
      ctx.metrics.placements.inc({ outcome: refusalOutcome(err) });
      // Nothing left but the nodes that just refused: the cluster is full for this request.
      if (exclude.length > (hint.excludeNodes?.length ?? 0) && err instanceof DomainError)
        throw new DomainError('capacity', `no node has room: ${err.message}`, retryAfter);
      throw err;
    }
    const { node, reservationId } = placement;
    let answer: NodeAnswer;
    try {
      answer = await send(node);
    } catch (err) {
      void release(ctx, reservationId);
      if (err instanceof DomainError && err.kind === 'bad_gateway') {
        ctx.metrics.placements.inc({ outcome: 'node_unreachable' });
        ctx.logger.warn(
          { node: node.nodeId, err: err.message },
          'placement: node unreachable, trying another',
        );
        exclude.push(node.nodeId);
        continue;
      }
      throw err;
    }
    if (answer.status >= 200 && answer.status < 300) {
      ctx.metrics.placements.inc({ outcome: 'placed' });
      const id = sandboxIdOf(node, answer);
      if (id) await record(ctx, id, node.nodeId, reservationId);
      else void release(ctx, reservationId);
      return { node, answer };
    }
    void release(ctx, reservationId);
    // Full, or failed to start it (an overloaded node's restore timing out): no sandbox was
    // made, so another node may try. 501 asks for a feature no node has: the client's answer.
    if (isCapacityRefusal(answer) || (answer.status >= 500 && answer.status !== 501)) {
      ctx.metrics.placements.inc({
        outcome: answer.status >= 500 && answer.status !== 503 ? 'node_failed' : 'node_full',
      });
      retryAfter = Number(answer.headers['retry-after']) || retryAfter;
      exclude.push(node.nodeId);
      continue;
    }
    ctx.metrics.placements.inc({ outcome: 'refused_by_node' });
    return { node, answer };
  }
  throw new DomainError('capacity', `${MAX_ATTEMPTS} nodes tried had no room; retry later`, retryAfter);
}

function refusalOutcome(err: unknown): string {
  if (err instanceof DomainError && err.kind === 'capacity') return 'cluster_full';
  if (err instanceof DomainError && err.kind === 'unavailable') return 'unavailable';
  return err instanceof PlacementRefused ? err.reason : 'error';
}

function sandboxIdOf(node: NodeRef, a: NodeAnswer): string | undefined {
  const header = a.headers['x-agentenv-sandbox-id'];
  if (typeof header === 'string') return header;
  const body = answerJson<{ sandboxID?: unknown }>(node, a);
  return typeof body.sandboxID === 'string' ? body.sandboxID : undefined;
}

/**
 * Tells the scheduler where a sandbox now lives. The sandbox exists whatever the scheduler says,
 * and the node's next heartbeat carries it in its roster, so a failure here is only logged.
 */
export async function record(
  ctx: GatewayContext,
  sandboxId: string,
  nodeId: string,
  reservationId?: string,
): Promise<void> {
  try {
    await ctx.scheduler.recordAssignment(sandboxId, nodeId, reservationId);
  } catch (err) {
    ctx.logger.warn({ sandboxId, nodeId, err: (err as Error).message }, 'recording an assignment failed');
  }
}

async function release(ctx: GatewayContext, reservationId: string): Promise<void> {
  try {
    await ctx.scheduler.releaseReservation(reservationId);
  } catch (err) {
    // The scheduler drops unconfirmed reservations after a timeout anyway.
    ctx.logger.debug({ reservationId, err: (err as Error).message }, 'releasing a reservation failed');
  }
}
