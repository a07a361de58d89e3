import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { isDashboardPage, type LifecycleActivity } from '@agentenv/dashboard';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { checkApiKey, DomainError, notFound } from '@agentenv/common';
import type { NodeConfig } from '../config/index.js';
import type { NodeMetrics } from '../metrics/index.js';
import type { Orchestrator, SnapshotCatalog } from '../orchestrator/index.js';
import {
  errorResponseText,
  routeRequest,
  sendError,
  signedFilesRoute,
  type SandboxProxy,
  type SandboxRoute,
} from '../proxy/index.js';
import type { BuildFiles, BuiltTemplates } from '../templates/index.js';
import { errorHandler } from './errors.js';
import { createEdgeServer, tlsFiles } from '@agentenv/common';
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
import type { RuntimeCache, SnapshotStore } from '../snapshot/index.js';
import type { SandboxEventLog } from '../cluster/index.js';
import {
  VOLUME_CONTENT_PREFIX,
  volumeContentRoutes,
  VolumeMounts,
  volumeRoutes,
  type VolumeStore,
} from '../volumes/index.js';

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

/** Paths that answer without an API key. */
const OPEN = new Set(['/health', '/metrics', '/openapi.json']);
/** Bodies of control calls are small; 1 MiB leaves room for big metadata/env maps. */
const BODY_LIMIT = 1 << 20;

type NodeApp = FastifyInstance<Server, IncomingMessage, ServerResponse, Logger, TypeBoxTypeProvider>;

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
  app.setNotFoundHandler((req) => {
    throw notFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
  });
  app.addHook('onRequest', async (req) => {
    const pathname = req.url.split('?')[0]!;
    // The content API is authorised by each volume's own token (volumes/routes.ts).
    if (OPEN.has(pathname) || isDashboardPage(pathname) || pathname.startsWith(VOLUME_CONTENT_PREFIX)) return;
    checkApiKey(req.headers, req.raw.rawHeaders, deps.apiKey);
  });
  app.addHook('onResponse', async (req, reply) => {
    deps.metrics.requestDuration.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unknown', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
  await registerRoutes(app, deps);
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  return app;
}

/** The HTTP(S) server: sandbox traffic and upgrades to the proxy, the rest to Fastify. */
function edgeServerFactory(deps: AppDeps) {
  const domains = deps.config.sandboxProxy.domains;
  const sandboxRoute = (req: IncomingMessage): SandboxRoute | 'no-match' | undefined =>
    routeRequest(req.url ?? '/', req.headers, domains) ??
    signedFilesRoute(req.url ?? '/', req.method, deps.orchestrator.list());
  return (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
    const server = createEdgeServer((req, res) => {
      const route = sandboxRoute(req);
      // A signed /files URL that no sandbox's token produced: what envd answers for a forged one.
      if (route === 'no-match') sendError(res, new DomainError('unauthorized', 'invalid signature'));
      else if (route) void deps.proxy.handle(route, req, res);
      else handler(req, res);
    }, tlsFiles(deps.config));
    server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      const route = routeRequest(req.url ?? '/', req.headers, domains);
      if (route) void deps.proxy.upgrade(route, req, socket, head);
      else
        socket.end(
          errorResponseText(notFound(`no route for an upgrade of ${(req.url ?? '/').split('?')[0]}`)),
        );
    });
    // Proxied streams and long operations (fork, pause of big sandboxes) are not cut off there.
    return server;
  };
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
  await app.register(volumeContentRoutes, volumeOpts);
  await app.register(eventRoutes, { events: deps.events });
  await app.register(snapshotRoutes, { orchestrator: deps.orchestrator, snapshots: deps.snapshots, domain });
  await app.register(templateRoutes, {
    orchestrator: deps.orchestrator,
    templates: deps.templates.built,
    files: deps.templates.files,
    snapshots: deps.snapshots,
    defaultTimeoutSecs,
    domain,
  });
  if (deps.dashboard) {
    await app.register(dashboardRoutes, {
      orchestrator: deps.orchestrator,
      activity: deps.dashboard.activity,
      events: deps.events,
      nodeStatus: () => nodeStatusBody(deps),
      snapshots: deps.dashboard,
      usage: deps.usage,
    });
  }
}
