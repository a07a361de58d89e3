import { answerJson, ask, callNode, isCapacityRefusal, type GatewayContext } from '../context.js';
import { DomainError } from '@agentenv/common';
import { readBody, sendJson } from '../http.js';
import type { Binding, NodeRef } from '../scheduler/scheduler.js';
import type { ClientRequest, ClientResponse, NodeAnswer } from '../upstream/node-http.js';
import { placeAndSend } from './place-retry.js';

/** The node a sandbox lives on, or the client's 404 (410 for one lost with its node). */
export async function bindingOf(ctx: GatewayContext, sandboxId: string): Promise<Binding> {
  const b = await ask(() => ctx.scheduler.lookupNode(sandboxId));
  if (!b) throw new DomainError('not_found', `sandbox ${sandboxId} not found`);
  return b;
}

/** 410 for a sandbox lost with its node, with the reason the scheduler recorded. */
export async function lostError(ctx: GatewayContext, sandboxId: string, b: Binding): Promise<DomainError> {
  const events = await ctx.scheduler.sandboxEvents(sandboxId).catch(() => []);
  const lost = events.filter((e) => e.type === 'lost').at(-1);
  return new DomainError(
    'gone',
    `sandbox ${sandboxId} was lost: ${lost?.reason || `node failure (node ${b.node.nodeId})`}`,
  );
}

/** GET /sandboxes/{id}: the one call answered for a sandbox whose node cannot serve it. */
const readsSandbox = (req: ClientRequest) =>
  req.method === 'GET' && /^\/(v2\/)?sandboxes\/[a-z0-9]+(\?.*)?$/.test(req.url ?? '');

/** Paused with its pause on its node's disk only: that node alone can resume it. */
const pausedOnNode = (b: Binding) => b.state === 'paused' && b.pauseLocalOnly === true;

/** Its node is not up to serve it (see pausedOnNode). */
const nodeAway = (b: Binding) => b.node.status === 'unhealthy' || b.node.status === 'connecting';

/** A retryable 503 for a sandbox whose pause only its node, away now, holds. */
function awaitingNode(sandboxId: string, b: Binding): DomainError {
  return new DomainError(
    'unavailable',
    `sandbox ${sandboxId} is paused and its pause is stored only on node ${b.node.nodeId} ` +
      `(${b.node.status === 'ready' ? 'not answering' : b.node.status}), not yet in the shared ` +
      'repository: it can be resumed once that node is back; retry later',
    AWAY_RETRY_SECS,
  );
}

/** Seconds a client waits before asking again for a sandbox whose node is away. */
const AWAY_RETRY_SECS = 5;

/**
 * What a call on a sandbox paused on its node gets while that node cannot be reached: reading
 * it says where its pause is; anything else is a retryable 503. Other failures are thrown as they
 * are. Returns undefined when it answered.
 */
export function whileNodeAway(
  req: ClientRequest,
  res: ClientResponse,
  sandboxId: string,
  b: Binding,
  err?: unknown,
): undefined {
  const unreachable = err === undefined || (err instanceof DomainError && err.kind === 'bad_gateway');
  if (!pausedOnNode(b) || !unreachable) throw err;
  if (readsSandbox(req)) {
    sendJson(res, 200, {
      sandboxID: sandboxId,
      state: 'paused',
      nodeID: b.node.nodeId,
      pauseStored: false,
      reason: awaitingNode(sandboxId, b).message,
    });
    return undefined;
  }
  throw awaitingNode(sandboxId, b);
}

export function relay(res: ClientResponse, a: NodeAnswer): void {
  res.writeHead(a.status, a.headers);
  res.end(a.body);
}

/** Any call on one sandbox: streamed to its node. */
export async function handleSandboxCall(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  sandboxId: string,
): Promise<void> {
  const b = await bindingOf(ctx, sandboxId);
  if (b.state === 'lost') {
    // Reading a lost sandbox says what became of it; anything else on it is gone.
    if (readsSandbox(req))
      return sendJson(res, 200, {
        sandboxID: sandboxId,
        state: 'lost',
        nodeID: b.node.nodeId,
        reason: (await lostError(ctx, sandboxId, b)).message,
      });
    throw await lostError(ctx, sandboxId, b);
  }
  if (pausedOnNode(b) && nodeAway(b)) return whileNodeAway(req, res, sandboxId, b);
  await ctx.nodes
    .stream(b.node, req, res, { tls: ctx.tls, headerTimeoutMs: ctx.startTimeoutMs })
    .catch((err: unknown) => whileNodeAway(req, res, sandboxId, b, err));
}

/**
 * A call on the sandbox's node answered in full, so the gateway can act on the answer before the
 * client hears it; undefined when the gateway answered itself (see whileNodeAway).
 */
export async function callOnItsNode(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  sandboxId: string,
): Promise<{ b: Binding; answer: NodeAnswer } | undefined> {
  const b = await bindingOf(ctx, sandboxId);
  if (b.state === 'lost') throw await lostError(ctx, sandboxId, b);
  const body = await readBody(req);
  const answer = await callNode(ctx, b.node, req, { body, timeoutMs: ctx.startTimeoutMs }).catch(
    (err: unknown) => whileNodeAway(req, res, sandboxId, b, err),
  );
  return answer && { b, answer };
}

/**
 * Tells the scheduler what the sandbox's node just did, before the client hears of it. A failure
 * is logged and not the client's: the node's next heartbeat says the same, a little later.
 */
export async function tellScheduler(
  ctx: GatewayContext,
  sandboxId: string,
  b: Binding,
  failure: string,
  call: () => Promise<unknown>,
): Promise<void> {
  await call().catch((err: unknown) => {
    ctx.logger.warn({ sandboxId, node: b.node.nodeId, err: (err as Error).message }, failure);
  });
}

/**
 * A snapshot, taken on the sandbox's node. That node's runtime cache holds it from then on; the
 * scheduler is told before the client hears of the snapshot, so the creates from it that follow
 * go to that node while it has room, instead of waiting for the node's next heartbeat to say so.
 */
export async function handleSnapshot(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  sandboxId: string,
): Promise<void> {
  // A node answers once it can start from the snapshot itself; any node of the cluster may be
  // asked to next, so the answer waits until the shared repository holds it.
  const url = new URL(req.url ?? '/', 'http://gateway');
  url.searchParams.set('wait', 'stored');
  req.url = url.pathname + url.search;
  const called = await callOnItsNode(ctx, req, res, sandboxId);
  if (!called) return;
  const { b, answer } = called;
  if (answer.status >= 200 && answer.status < 300) {
    const snap = answerJson<{ snapshotID?: unknown; names?: unknown }>(b.node, answer);
    if (typeof snap.snapshotID === 'string') {
      const names = Array.isArray(snap.names) ? snap.names.filter((n) => typeof n === 'string') : [];
      // The snapshot exists whatever the scheduler says; without this only locality is late.
      const snapshotID = snap.snapshotID;
      await tellScheduler(ctx, sandboxId, b, 'recording a snapshot for placement failed', () =>
        ctx.scheduler.recordSnapshot(b.node.nodeId, snapshotID, names),
      );
    }
  }
  relay(res, answer);
}

/**
 * Connect/resume. On its node when that node is ready and has room; a paused sandbox whose node
 * is gone, draining or full is placed like a create (preferring a node holding its pause in
 * cache), and the node asked takes it over from the shared repository — the repository's claim
 * decides, so two resumes never both win.
 */
export async function handleResume(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  sandboxId: string,
): Promise<void> {
  const body = await readBody(req);
  const b = await ask(() => ctx.scheduler.lookupNode(sandboxId));
  if (b?.state === 'lost') throw await lostError(ctx, sandboxId, b);
  const send = (node: NodeRef) => callNode(ctx, node, req, { body, timeoutMs: ctx.startTimeoutMs });
  // No other node can resume it (it would find an older pause, or none): its node or nothing.
  if (b && pausedOnNode(b)) {
    if (nodeAway(b)) throw awaitingNode(sandboxId, b);
    const answer = await send(b.node).catch((err: unknown) => whileNodeAway(req, res, sandboxId, b, err));
    return answer && relay(res, answer);
  }
  const exclude: string[] = [];
  // Why the sandbox's own node did not do it, answered if no other node can either.
  let own: DomainError | undefined;
  if (b) {
    // A draining node still serves what runs on it; what is paused there moves.
    const usable = b.node.status === 'ready' || (b.node.status === 'draining' && b.state !== 'paused');
    if (usable) {
      const answer = await send(b.node).catch((err: unknown) => {
        if (err instanceof DomainError && err.kind === 'bad_gateway') return err;
        throw err;
      });
      if (answer instanceof DomainError) own = answer;
      else if (!(isCapacityRefusal(answer) && b.state === 'paused')) return relay(res, answer);
    } else
      own = new DomainError(
        'bad_gateway',
        `node ${b.node.nodeId} of sandbox ${sandboxId} is ${b.node.status}`,
      );
    exclude.push(b.node.nodeId);
  }
  const hint = {
    kind: 'resume' as const,
    sandboxId,
    excludeNodes: exclude,
    ...(b?.pauseId ? { pauseId: b.pauseId } : {}),
  };
  const { answer } = await placeAndSend(ctx, hint, send);
  // Nothing in the shared repository to resume: the sandbox was not paused, its node is the answer.
  if (answer.status === 404 && own && b?.state !== 'paused') throw own;
  relay(res, answer);
}
