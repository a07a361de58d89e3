import { answerJson, callNode, type GatewayContext } from '../context.js';
import { DomainError } from '@agentenv/common';
import { parseObject, readBody } from '../http.js';
import type { NodeRef } from '../scheduler/scheduler.js';
import { requestHeaders } from '../upstream/headers.js';
import type { ClientRequest, ClientResponse, NodeAnswer } from '../upstream/node-http.js';
import { placeAndSend, record } from './place-retry.js';
import { bindingOf, lostError, relay } from './sandbox.js';

type ForkResult = { sandbox: { sandboxID: string } & Record<string, unknown> } | { error: { code: number } };
/** A child's result, with the node it was spilled to. */
type Placed = ForkResult & { nodeId?: string };

const refusedForRoom = (r: ForkResult) => 'error' in r && (r.error.code === 429 || r.error.code === 503);

/**
 * POST /sandboxes/{id}/fork: the children start on the parent's node; those it had no room for
 * are started on other nodes from a snapshot of the parent, taken through the API and so stored
 * in the shared repository. Every child's node is recorded.
 */
export async function handleFork(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  sandboxId: string,
): Promise<void> {
  const raw = await readBody(req);
  const body = parseObject(raw);
  const b = await bindingOf(ctx, sandboxId);
  if (b.state === 'lost') throw await lostError(ctx, sandboxId, b);
  const parent = b.node;
  const answer = await callNode(ctx, parent, req, { body: raw, timeoutMs: ctx.startTimeoutMs });
  if (answer.status !== 201) return relay(res, answer);
  const results = answerJson<ForkResult[]>(parent, answer);
  if (!Array.isArray(results))
    throw new DomainError('bad_gateway', `node ${parent.nodeId} answered a fork with no list`);
  const spilled: Placed[] = results.some(refusedForRoom)
    ? await spill(ctx, req, parent, sandboxId, body, results)
    : results;
  // Spilled children were recorded by their placement; those on the parent's node are here.
  await Promise.all(
    spilled.map((r) =>
      'sandbox' in r && !r.nodeId ? record(ctx, r.sandbox.sandboxID, parent.nodeId) : undefined,
    ),
  );
  const out = JSON.stringify(spilled.map(({ nodeId: _n, ...r }) => r));
  res.writeHead(201, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(out)),
  });
  res.end(out);
}

/**
 * The create body of a child started on another node from the spill snapshot: the settings a
 * child on the parent's node gets (the parent node's GET /sandboxes/{id}/fork), with the fork's
 * own timeout when it gave one.
 */
export function spillCreateBody(
  settings: Record<string, unknown>,
  snapshotId: string,
  forkBody: Record<string, unknown>,
): Record<string, unknown> {
  return {
    ...settings,
    ...(typeof forkBody.timeout === 'number' ? { timeout: forkBody.timeout } : {}),
    templateID: snapshotId,
  };
}

/**
 * The children refused for room, started elsewhere from a snapshot of the parent with the
 * parent's settings. The snapshot exists for them only: it is deleted once they have started
 * (or failed to).
 */
async function spill(
  ctx: GatewayContext,
  req: ClientRequest,
  parent: NodeRef,
  sandboxId: string,
  forkBody: Record<string, unknown>,
  results: ForkResult[],
): Promise<Placed[]> {
  const call = (method: string, path: string, body?: unknown) =>
    callNode(ctx, parent, req, {
      method,
      path,
      ...(body !== undefined ? { body: Buffer.from(JSON.stringify(body)) } : {}),
      timeoutMs: ctx.startTimeoutMs,
    });
  // Asked first: without the parent's settings no child may start elsewhere, and no snapshot is
  // taken. The snapshot must be in the shared repository before other nodes start from it.
  const settings = await call('GET', `/sandboxes/${sandboxId}/fork`);
  const snap =
    settings.status === 200
      ? await call('POST', `/sandboxes/${sandboxId}/snapshots?wait=stored`, {})
      : undefined;
  if (settings.status !== 200 || snap?.status !== 201) {
    ctx.logger.warn(
      { sandboxId, settings: settings.status, snapshot: snap?.status },
      'fork spill: no settings or no snapshot of the parent',
    );
    return results;
  }
  const { snapshotID } = answerJson<{ snapshotID: string }>(parent, snap);
  try {
    const create = Buffer.from(
      JSON.stringify(spillCreateBody(settingsOf(parent, settings), snapshotID, forkBody)),
    );
    return await Promise.all(
      results.map((r) => (refusedForRoom(r) ? startElsewhere(ctx, req, parent, snapshotID, create, r) : r)),
    );
  } finally {
    await dropSnapshot(ctx, req, parent, snapshotID);
  }
}

function settingsOf(parent: NodeRef, a: NodeAnswer): Record<string, unknown> {
  const s = answerJson<unknown>(parent, a);
  if (typeof s !== 'object' || s === null || Array.isArray(s))
    throw new DomainError('bad_gateway', `node ${parent.nodeId} answered a fork's settings with no object`);
  return s as Record<string, unknown>;
}

/** One refused child, placed on another node; the refusal stands when no node has room. */
async function startElsewhere(
  ctx: GatewayContext,
  req: ClientRequest,
  parent: NodeRef,
  snapshotId: string,
  create: Buffer,
  refused: ForkResult,
): Promise<Placed> {
  try {
    const { node, answer } = await placeAndSend(
      ctx,
      { kind: 'fork_spill', templateId: snapshotId, snapshotId, excludeNodes: [parent.nodeId] },
      (n) => createOn(ctx, req, n, create),
    );
    if (answer.status !== 201) return { error: errorOf(answer) };
    return { sandbox: answerJson<{ sandboxID: string }>(node, answer), nodeId: node.nodeId };
  } catch (err) {
    const status = err instanceof DomainError ? err.kind : 'internal';
    ctx.logger.info({ status }, 'fork spill: a child found no room elsewhere');
    return refused;
  }
}

/** The spill snapshot, through the parent's node (the repository is shared); a failure is logged. */
async function dropSnapshot(
  ctx: GatewayContext,
  req: ClientRequest,
  parent: NodeRef,
  snapshotId: string,
): Promise<void> {
  // The client's headers for its key, without those of its fork's body: this call has none.
  const headers = requestHeaders(req.headers, { upgrade: false, tls: ctx.tls });
  for (const h of ['content-type', 'content-length', 'transfer-encoding']) delete headers[h];
  try {
    const a = await ctx.nodes.call(parent, {
      method: 'DELETE',
      path: `/templates/${encodeURIComponent(snapshotId)}`,
      headers,
      timeoutMs: ctx.controlTimeoutMs,
    });
    if (a.status >= 300) throw new Error(`status ${a.status}`);
  } catch (err) {
    ctx.logger.warn({ snapshotId, err: (err as Error).message }, 'fork spill: deleting the snapshot failed');
  }
}

function createOn(ctx: GatewayContext, req: ClientRequest, node: NodeRef, body: Buffer): Promise<NodeAnswer> {
  return callNode(ctx, node, req, {
    method: 'POST',
    path: '/sandboxes',
    body,
    timeoutMs: ctx.startTimeoutMs,
  });
}

function errorOf(a: NodeAnswer): { code: number; message: string } {
  try {
    const b = JSON.parse(a.body.toString('utf8')) as { message?: string };
    return { code: a.status, message: b.message ?? `status ${a.status}` };
  } catch {
    return { code: a.status, message: `status ${a.status}` };
  }
}
