import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { EventStreams } from '@agentenv/common';
import { IdempotencyStore } from './admission/idempotency.js';
import { AdmissionQueue } from './admission/queue.js';
import type { GatewayConfig } from './config.js';
import type { GatewayContext } from './context.js';
import { GatewayMetrics } from './metrics.js';
import { TemplateAffinity } from './routing/template-affinity.js';
import type { Scheduler } from './scheduler/scheduler.js';
import { createGatewayServer } from './server.js';
import { NodeHttp } from './upstream/node-http.js';

/** How long the gateway remembers which node registered a template build. */
const BUILD_AFFINITY_MS = 6 * 3600_000;

export interface RunningGateway {
  server: Server;
  ctx: GatewayContext;
  url: string;
  close(): Promise<void>;
}

/** Builds the gateway's parts around a scheduler client and listens. */
export async function startGateway(
  config: GatewayConfig,
  scheduler: Scheduler,
  logger: Logger,
): Promise<RunningGateway> {
  const admission = new AdmissionQueue({
    maxInFlight: config.maxInFlightCreates,
    maxWaiting: config.maxQueuedCreates,
    maxWaitMs: config.queueWaitMs,
    retryAfterSecs: 2,
  });
  const metrics = new GatewayMetrics({
    queue: () => ({ waiting: admission.depth, inFlight: admission.active }),
    nodeLoad: async () =>
      (await scheduler.listNodes()).map((n) => ({
        nodeId: n.ref.nodeId,
        status: n.ref.status,
        sandboxes: Number(n.info.sandboxCount ?? 0),
      })),
  });
  const nodes = new NodeHttp();
  const ctx: GatewayContext = {
    scheduler,
    nodes,
    admission,
    idempotency: new IdempotencyStore({ ttlMs: config.idempotencyTtlMs, maxKeys: 100_000 }),
    templates: new TemplateAffinity(BUILD_AFFINITY_MS),
    metrics,
    logger,
    tls: !!config.tls,
    controlTimeoutMs: config.controlTimeoutMs,
    startTimeoutMs: config.startTimeoutMs,
    streams: new EventStreams(config.streams),
  };
  const server = createGatewayServer(ctx, {
    apiKey: config.apiKey,
    domains: config.domains,
    ...(config.tls ? { tls: config.tls } : {}),
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  return {
    server,
    ctx,
    url: `${config.tls ? 'https' : 'http'}://${host}:${port}`,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      });
      nodes.close();
    },
  };
}
