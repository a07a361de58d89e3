import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { LifecycleActivity } from '@agentenv/dashboard';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { notFound, type StreamLimits } from '@agentenv/common';
import type { NodeConfig } from '../config/index.js';
import type { NodeMetrics } from '../metrics/index.js';
import type { Orchestrator, SnapshotCatalog } from '../orchestrator/index.js';
import type { SandboxProxy } from '../proxy/index.js';
import type { BuildFiles, BuiltTemplates } from '../templates/index.js';
import { asPublic, authGate, PUBLIC_ROUTE, routeRecorder, type RouteAccess } from './auth.js';
import { edgeServerFactory } from './edge.js';
import { errorHandler } from './errors.js';
import { unsupportedRoutes } from './unsupported.js';
import { drainRefusedBodies } from './refused-body.js';
import {
  dashboardRoutes,
  eventRoutes,
  nodeStatusBody,
  sandboxRoutes,
  snapshotRoutes,
  systemRoutes,
  templateRoutes,
  type SandboxRoutesOptions,
} from './routes/index.js';
import type { RuntimeCache, SnapshotStore } from '@agentenv/snapshot';
import type { SandboxEventLog } from '../cluster/index.js';
import { volumeContentRoutes, VolumeMounts, volumeRoutes, type VolumeStore } from '../volumes/index.js';

export interface AppDeps {
  config: NodeConfig;
  apiKey: string;
  orchestrator: Orchestrator;
  snapshots: SnapshotCatalog;
  templates: { built: BuiltTemplates; files: BuildFiles };
  proxy: SandboxProxy;
  metrics: NodeMetrics;
  events: SandboxEventLog;
  usage: SandboxRoutesOptions['usage'];
  logger: Logger;
  version: string;
  volumes: VolumeStore;
  /**
   * What the dashboard shows beyond the public API: recent operations, the capture catalogue.
   * Without it the node serves no dashboard (an app built for unit tests of the API).
   */
  dashboard?: { activity: LifecycleActivity; store: SnapshotStore; cache: RuntimeCache };
}

/** Bodies of control calls are small; 1 MiB leaves room for big metadata/env maps. */
const BODY_LIMIT = 1 << 20;

type NodeApp = FastifyInstance<Server, IncomingMessage, ServerResponse, Logger, TypeBoxTypeProvider>;

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route of the app with who may call it, as the router took them. */
    routeAccess: readonly RouteAccess[];
  }
}

/**
 * The node's HTTP entry point: one port for the REST API and sandbox traffic. Requests that
 * carry sandbox routing (headers, a sandbox host, /proxy/) go to the proxy before Fastify sees
 * them, so their bodies stream through untouched.
 */
export async function buildApp(deps: AppDeps): Promise<NodeApp> {
  const app = Fastify({
    loggerInstance: deps.logger,
    // Request durations go to /metrics; per-request log lines would drown the node's own.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT,
    serverFactory: edgeServerFactory(deps),
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', allErrors: false } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  await app.register(swagger, {
    openapi: {
      info: {
        title: 'AgentENV node API',
        version: deps.version,
        description: 'E2B-compatible sandbox API plus AgentENV additions',
      },
      components: { securitySchemes: { ApiKeyAuth: { type: 'apiKey', in: 'header', name: 'X-API-Key' } } },
      security: [{ ApiKeyAuth: [] }],
    },
  });

  app.setErrorHandler(errorHandler);
  app.addHook('onSend', drainRefusedBodies());
  app.setNotFoundHandler((req) => {
    throw notFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
  });
  app.addHook('onRequest', authGate(deps.apiKey));
  const routeAccess: RouteAccess[] = [];
  app.addHook('onRoute', routeRecorder(routeAccess));
  app.decorate('routeAccess', routeAccess);
  app.addHook('onResponse', async (req, reply) => {
    deps.metrics.requestDuration.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unknown', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
  await registerRoutes(app, deps);
  app.get('/openapi.json', { schema: { hide: true }, config: PUBLIC_ROUTE }, async () => app.swagger());
  return app;
}

async function registerRoutes(app: NodeApp, deps: AppDeps): Promise<void> {
  const domain = deps.config.sandboxProxy.domains[0];
  const defaultTimeoutSecs = deps.config.orchestrator.defaultSandboxTimeoutSecs;
  await app.register(systemRoutes, {
    orchestrator: deps.orchestrator,
    metrics: deps.metrics,
    config: deps.config,
    version: deps.version,
  });
  await app.register(sandboxRoutes, {
    orchestrator: deps.orchestrator,
    defaultTimeoutSecs,
    domain,
    usage: deps.usage,
    volumes: new VolumeMounts(deps.volumes),
  });
  const volumeOpts = { store: deps.volumes, quotaBytes: deps.config.volumes.quotaMb * 1024 * 1024 };
  await app.register(volumeRoutes, volumeOpts);
  // The content API is authorised by each volume's own token (volumes/routes.ts).
  await app.register(asPublic(volumeContentRoutes), volumeOpts);
  await app.register(eventRoutes, { events: deps.events });
  await app.register(snapshotRoutes, { orchestrator: deps.orchestrator, snapshots: deps.snapshots, domain });
  await app.register(templateRoutes, {
    templates: deps.templates.built,
    files: deps.templates.files,
    snapshots: deps.snapshots,
  });
  await app.register(unsupportedRoutes);
  if (deps.dashboard) {
    await app.register(dashboardRoutes, {
      orchestrator: deps.orchestrator,
      activity: deps.dashboard.activity,
      events: deps.events,
      nodeStatus: () => nodeStatusBody(deps),
      snapshots: deps.dashboard,
      usage: deps.usage,
      streamLimits: streamLimits(deps.config.streams),
    });
  }
}

function streamLimits(c: NodeConfig['streams']): StreamLimits {
  return { maxOpen: c.maxOpen, maxPerKey: c.maxPerKey, maxBufferedBytes: c.maxBufferedKb * 1024 };
}
