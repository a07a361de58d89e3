import { PAUSE_STORED_HEADER } from '@agentenv/protocol';
import type { GatewayContext } from '../context.js';
import type { ClientRequest, ClientResponse } from '../upstream/node-http.js';
import { callOnItsNode, relay, tellScheduler } from './sandbox.js';

/**
 * A pause, on the sandbox's node. The scheduler is told before the client hears of it, with
 * whether the shared repository holds the pause yet (the node's answer says): a node that dies
 * right after the answer then leaves the sandbox paused on it, waiting for it to come back, not
 * lost as running. Without the scheduler the node's next heartbeat says it, a little later.
 */
export async function handlePause(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  sandboxId: string,
): Promise<void> {
  const called = await callOnItsNode(ctx, req, res, sandboxId);
  if (!called) return;
  const { b, answer } = called;
  if (answer.status >= 200 && answer.status < 300) {
    const stored = answer.headers[PAUSE_STORED_HEADER] === 'true';
    await tellScheduler(
      ctx,
      sandboxId,
      b,
      'recording a pause with the scheduler failed: the node heartbeat will say it',
      () => ctx.scheduler.recordPause(sandboxId, b.node.nodeId, stored),
    );
  }
  relay(res, answer);
}
