import type { Logger } from 'pino';
import type { AdmissionQueue } from './admission/queue.js';
import type { IdempotencyStore } from './admission/idempotency.js';
import { DomainError, type EventStreams } from '@agentenv/common';
import type { GatewayMetrics } from './metrics.js';
import {
  PlacementRefused,
  SchedulerUnavailable,
  type NodeRef,
  type Scheduler,
} from './scheduler/scheduler.js';
import type { TemplateAffinity } from './routing/template-affinity.js';
import type { ClientRequest, NodeAnswer, NodeHttp } from './upstream/node-http.js';
import { requestHeaders } from './upstream/headers.js';

/** Everything a gateway handler works with. */
export interface GatewayContext {
  scheduler: Scheduler;
  nodes: NodeHttp;
  admission: AdmissionQueue;
  idempotency: IdempotencyStore;
  templates: TemplateAffinity;
  metrics: GatewayMetrics;
  logger: Logger;
  /** The gateway listens with TLS (X-Forwarded-Proto). */
  tls: boolean;
  /** Control calls to a node answer within this, or 504. */
  controlTimeoutMs: number;
  /** Creates, forks and resumes, which restore sandboxes, may take longer. */
  startTimeoutMs: number;
  /** The event streams open (GET /events, the dashboard's), bounded in number and in what they hold. */
  streams: EventStreams;
}

/** A scheduler call, its failures turned into the gateway's answers (503, 429). */
export async function ask<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof SchedulerUnavailable)
      throw new DomainError('unavailable', `the scheduler is unavailable: ${err.message}`, 2);
    if (err instanceof PlacementRefused) {
      const kind = err.reason === 'cluster_full' ? 'capacity' : 'unavailable';
      throw new DomainError(kind, err.message, err.retryAfterSecs);
    }
    throw err;
  }
}

/** A control call to a node with the client's headers, read whole. */
export function callNode(
  ctx: GatewayContext,
  node: NodeRef,
  req: ClientRequest,
  call: { method?: string; path?: string; body?: Buffer; timeoutMs?: number },
): Promise<NodeAnswer> {
  const headers = requestHeaders(req.headers, { upgrade: false, tls: ctx.tls });
  delete headers['content-length'];
  delete headers['transfer-encoding'];
  if (call.body) headers['content-length'] = String(call.body.length);
  return ctx.nodes.call(node, {
    method: call.method ?? req.method ?? 'GET',
    path: call.path ?? req.url ?? '/',
    headers,
    ...(call.body ? { body: call.body } : {}),
    timeoutMs: call.timeoutMs ?? ctx.controlTimeoutMs,
  });
}

/** Parses a node's JSON answer; a node that answers garbage is a bad gateway. */
export function answerJson<T>(node: NodeRef, a: NodeAnswer): T {
  try {
    return JSON.parse(a.body.toString('utf8')) as T;
  } catch {
    throw new DomainError(
      'bad_gateway',
      `node ${node.nodeId} answered ${a.status} with a body that is not JSON`,
    );
  }
}

/** A node refused for lack of room (its own limit), so another node may take the work. */
export const isCapacityRefusal = (a: NodeAnswer) => a.status === 429 || a.status === 503;
