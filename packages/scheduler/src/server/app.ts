import { connectNodeAdapter } from '@connectrpc/connect-node';
import { SchedulerService } from '@agentenv/protocol/scheduler';
import type { Logger } from 'pino';
import { ChunkPeers } from '../chunks/chunk-peers.js';
import { systemClock, type Clock } from '../clock.js';
import { EventLog } from '../events.js';
import { FailureDetector } from '../membership/failures.js';
import { Watch } from '../membership/health.js';
import { listen, type Handler, type Listener } from './listener.js';
import { Membership } from '../membership/membership.js';
import { SchedulerMetrics } from './metrics.js';
import { Reservations } from '../schedule/reservations.js';
import { guarded, plainRoutes, wellFormed } from './plain-routes.js';
import { apiKeyGate, requestContext } from '../rpc/auth.js';
import { schedulerService } from '../rpc/service.js';
import type { SchedulerSettings } from '../settings.js';
import type { SchedulerStore } from '../store/store.js';

export interface SchedulerAppOptions {
  host: string;
  port: number;
  metrics?: { host: string; port: number };
  apiKey: string;
  store: SchedulerStore;
  settings: SchedulerSettings;
  logger: Logger;
  clock?: Clock;
}

export interface SchedulerApp {
  port: number;
  metricsPort?: number;
  close(): Promise<void>;
}

/** Wires the domain services, the Connect handler, /metrics and /health, and the failure sweep. */
export async function startScheduler(o: SchedulerAppOptions): Promise<SchedulerApp> {
  const clock = o.clock ?? systemClock;
  const metrics = new SchedulerMetrics();
  const watch = new Watch(clock, o.settings.heartbeatIntervalMs);
  const membership = new Membership(o.store, clock, o.settings, watch);
  const placements = new Reservations(o.store, clock, o.settings, membership, metrics);
  const events = new EventLog(o.store, clock);
  const failures = new FailureDetector(o.store, clock, o.settings, membership, events);

  const plain = plainRoutes({
    apiKey: o.apiKey,
    logger: o.logger,
    metrics: async () => ({
      text: await metrics.render(await membership.views(), clock.now()),
      contentType: metrics.registry.contentType,
    }),
  }) as unknown as Handler;

  const rpc = connectNodeAdapter({
    routes: (router) =>
      router.service(
        SchedulerService,
        schedulerService({
          store: o.store,
          membership,
          placements,
          events,
          chunkPeers: new ChunkPeers(o.store, membership),
          heartbeatIntervalMs: o.settings.heartbeatIntervalMs,
          onHeartbeat: (_nodeId, ok) => metrics.heartbeat(ok),
        }),
      ),
    requestGate: apiKeyGate(o.apiKey),
    contextValues: requestContext,
    fallback: plain,
  });

  const main = await listen(o.host, o.port, guarded(wellFormed(rpc), o.logger) as Handler);
  let side: Listener | undefined;
  try {
    if (o.metrics) side = await listen(o.metrics.host, o.metrics.port, plain);
  } catch (err) {
    await main.close();
    throw err;
  }

  // Ticks a few times an interval, apart from any store call, so only a stall of this process
  // (or its start) breaks the watch.
  const interval = o.settings.heartbeatIntervalMs;
  const ticker = setInterval(() => watch.tick(), interval / 4);
  ticker.unref();
  // Every half interval, so a silent node is acted on within its third missed heartbeat; one
  // sweep at a time, however slow the store.
  let sweep: NodeJS.Timeout | undefined;
  let closed = false;
  const sweepOnce = async () => {
    try {
      for (const r of await failures.sweep())
        o.logger.warn(r, 'node stopped heartbeating: its running sandboxes are lost');
    } catch (err) {
      o.logger.error({ err }, 'failure sweep failed');
    }
    if (!closed) (sweep = setTimeout(() => void sweepOnce(), interval / 2)).unref();
  };
  (sweep = setTimeout(() => void sweepOnce(), interval / 2)).unref();

  return {
    port: main.port,
    ...(side ? { metricsPort: side.port } : {}),
    close: async () => {
      closed = true;
      clearInterval(ticker);
      clearTimeout(sweep);
      await side?.close();
      await main.close();
    },
  };
}
