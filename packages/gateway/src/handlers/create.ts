import { fingerprint, type StoredAnswer } from '../admission/idempotency.js';
import { callNode, type GatewayContext } from '../context.js';
import { DEFAULT_TEMPLATE, DomainError } from '@agentenv/common';
import { parseObject, readBody } from '../http.js';
import type { PlacementHint } from '../scheduler/scheduler.js';
import type { ClientRequest, ClientResponse } from '../upstream/node-http.js';
import { listableNodes } from './list.js';
import { placeAndSend } from './place-retry.js';
import { nodesForVolumes } from './volumes.js';

/**
 * What placement can learn from a create's body: its template (or snapshot), and for a cold
 * create, the only one whose body sizes the sandbox, its size.
 */
export function createHint(body: Record<string, unknown>, cold: boolean): PlacementHint {
  const hint: PlacementHint = {};
  if (!cold) {
    // A snapshot id works as a templateID: the scheduler matches either against cache keys.
    hint.templateId = typeof body.templateID === 'string' ? body.templateID : DEFAULT_TEMPLATE;
    return hint;
  }
  if (typeof body.image === 'string') hint.templateId = body.image;
  if (typeof body.cpuCount === 'number') hint.cpuCount = body.cpuCount;
  // The API's memoryMB counts mebibytes, as E2B's does.
  if (typeof body.memoryMB === 'number') hint.memoryMib = body.memoryMB;
  return hint;
}

/**
 * POST /sandboxes, /v2/sandboxes, /sandboxes-cold: admitted through the wait queue, placed by
 * the scheduler, answered by the node. With `Idempotency-Key` a retry gets the first answer.
 */
export async function handleCreate(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  cold: boolean,
): Promise<void> {
  const raw = await readBody(req);
  const body = parseObject(raw);
  const hint = createHint(body, cold);
  const volumeNodes = await nodesForVolumes(ctx, req, body);
  if (volumeNodes) {
    const others = (await listableNodes(ctx)).filter((n) => !volumeNodes.includes(n.nodeId));
    hint.excludeNodes = others.map((n) => n.nodeId);
  }
  const key = req.headers['idempotency-key'];
  if (Array.isArray(key)) throw new DomainError('invalid', 'Idempotency-Key given more than once');
  if (key !== undefined && (key.length === 0 || key.length > 256))
    throw new DomainError('invalid', 'Idempotency-Key must be 1-256 characters');
  const work = () => admitted(ctx, req, raw, hint);
  const path = (req.url ?? '/').split('?')[0]!;
  const answer = key
    ? await ctx.idempotency.run(key, fingerprint(req.method ?? 'POST', path, raw.toString('utf8')), work)
    : await work();
  res.writeHead(answer.status, answer.headers);
  res.end(answer.body);
}

async function admitted(
  ctx: GatewayContext,
  req: ClientRequest,
  raw: Buffer,
  hint: PlacementHint,
): Promise<StoredAnswer> {
  const done = ctx.metrics.queueWait.startTimer();
  const release = await ctx.admission.acquire().finally(() => done());
  try {
    const { answer } = await placeAndSend(ctx, hint, (node) =>
      callNode(ctx, node, req, { body: raw, timeoutMs: ctx.startTimeoutMs }),
    );
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(answer.headers))
      if (typeof v === 'string' && k !== 'connection' && k !== 'keep-alive') headers[k] = v;
    return { status: answer.status, headers, body: answer.body.toString('utf8') };
  } finally {
    release();
  }
}
