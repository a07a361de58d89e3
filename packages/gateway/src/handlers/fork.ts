import { answerJson, callNode, type GatewayContext } from '../context.js';
import { DomainError } from '@agentenv/common';
import { parseObject, readBody } from '../http.js';
import type { NodeRef } from '../scheduler/scheduler.js';
import type { ClientRequest, ClientResponse, NodeAnswer } from '../upstream/node-http.js';
import { placeAndSend, record } from './placement.js';
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

/** The children refused for room, started elsewhere from a snapshot of the parent. */
async function spill(
  ctx: GatewayContext,
  req: ClientRequest,
  parent: NodeRef,
  sandboxId: string,
  forkBody: Record<string, unknown>,
  results: ForkResult[],
): Promise<Placed[]> {
  const json = (path: string, method: string, body?: unknown) =>
    callNode(ctx, parent, req, {
      method,
      path,
      ...(body !== undefined ? { body: Buffer.from(JSON.stringify(body)) } : {}),
      timeoutMs: ctx.startTimeoutMs,
    });
  const snap = await json(`/sandboxes/${sandboxId}/snapshots`, 'POST', {});
  const info = await json(`/sandboxes/${sandboxId}`, 'GET');
  if (snap.status !== 201 || info.status !== 200) {
    ctx.logger.warn(
      { sandboxId, snapshot: snap.status, info: info.status },
      'fork spill: no snapshot of the parent',
    );
    return results;
  }
  const { snapshotID } = answerJson<{ snapshotID: string }>(parent, snap);
  const detail = answerJson<{
    metadata?: unknown;
    endAt?: string;
    envdAccessToken?: string;
    lifecycle?: { onTimeout?: string; autoResume?: boolean };
  }>(parent, info);
  const timeout =
    typeof forkBody.timeout === 'number'
      ? forkBody.timeout
      : Math.max(1, Math.ceil((Date.parse(detail.endAt ?? '') - Date.now()) / 1000) || 300);
  const create = Buffer.from(
    JSON.stringify({
      templateID: snapshotID,
      timeout,
      metadata: detail.metadata ?? {},
      autoPause: detail.lifecycle?.onTimeout !== 'kill',
      autoResume: { enabled: detail.lifecycle?.autoResume ?? false },
      secure: detail.envdAccessToken !== undefined,
    }),
  );
  return Promise.all(
    results.map(async (r) => {
      if (!refusedForRoom(r)) return r;
      try {
        const { node, answer } = await placeAndSend(
          ctx,
          {
            kind: 'fork_spill',
            templateId: snapshotID,
            snapshotId: snapshotID,
            excludeNodes: [parent.nodeId],
          },
          (n) => createOn(ctx, req, n, create),
        );
        if (answer.status !== 201) return { error: errorOf(answer) };
        return { sandbox: answerJson<{ sandboxID: string }>(node, answer), nodeId: node.nodeId };
      } catch (err) {
        const status = err instanceof DomainError ? err.kind : 'internal';
        ctx.logger.info({ sandboxId, status }, 'fork spill: a child found no room elsewhere');
        return r;
      }
    }),
  );
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
