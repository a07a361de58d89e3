import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { checkApiKey, createEdgeServer, routeRequest, type TlsFiles } from '@agentenv/common';
import type { GatewayContext } from './context.js';
import { gatewayDashboard } from './dashboard.js';
import { queryOf, sendError, sendJson } from './http.js';
import { handleEventStream, handleNode, handleNodes, handleSandboxEvents } from './handlers/cluster.js';
import { handleCreate } from './handlers/create.js';
import { handleFork } from './handlers/fork.js';
import { handleList } from './handlers/list.js';
import { handleResume, handleSandboxCall, handleSnapshot } from './handlers/sandbox.js';
import { handleTemplate, handleAnyNode } from './handlers/shared.js';
import { handleTraffic, handleTrafficUpgrade } from './handlers/traffic.js';
import { classify, type ControlRoute } from './routing/classify.js';
import type { ClientRequest, ClientResponse } from './upstream/node-http.js';

export interface GatewayServerOptions {
  apiKey: string;
  domains: readonly string[];
  tls?: TlsFiles;
}

/** Answers without an API key, as on the node. */
const OPEN = new Set<ControlRoute['kind']>(['health', 'metrics']);

async function control(ctx: GatewayContext, req: ClientRequest, res: ClientResponse, route: ControlRoute) {
  switch (route.kind) {
    case 'health':
      return sendJson(res, 204, undefined);
    case 'metrics': {
      const text = await ctx.metrics.registry.metrics();
      res.writeHead(200, { 'content-type': ctx.metrics.registry.contentType });
      return res.end(text);
    }
    case 'nodes':
      return handleNodes(ctx, res);
    case 'node':
      return handleNode(ctx, res, route.nodeId);
    case 'events':
      return handleEventStream(ctx, res, queryOf(req.url ?? '/').get('sandboxID') ?? undefined);
    case 'sandbox-events':
      return handleSandboxEvents(ctx, res, route.sandboxId);
    case 'create':
      return handleCreate(ctx, req, res, route.cold);
    case 'list':
      return handleList(ctx, req, res, route.v2);
    case 'fork':
      return handleFork(ctx, req, res, route.sandboxId);
    case 'resume':
      return handleResume(ctx, req, res, route.sandboxId);
    case 'snapshot':
      return handleSnapshot(ctx, req, res, route.sandboxId);
    case 'sandbox':
      return handleSandboxCall(ctx, req, res, route.sandboxId);
    case 'template':
      return handleTemplate(ctx, req, res, route);
    case 'any-node':
      return handleAnyNode(ctx, req, res);
  }
}

/**
 * The gateway's one listener: sandbox traffic (recognised exactly as a node does) is streamed to
 * the sandbox's node; everything else is the control plane, key-checked as on the node.
 */
export function createGatewayServer(ctx: GatewayContext, o: GatewayServerOptions): Server {
  const dashboard = gatewayDashboard(ctx, o.apiKey);
  const server = createEdgeServer((req, res) => {
    const r = req as ClientRequest;
    const traffic = routeRequest(r.url ?? '/', r.headers, o.domains);
    if (traffic) {
      handleTraffic(ctx, r, res, traffic).catch((err: unknown) => sendError(res, err));
      return;
    }
    if (dashboard(r, res)) return;
    const route = classify(r.method ?? 'GET', r.url ?? '/');
    const end = ctx.metrics.requestDuration.startTimer({ route: route.kind, method: r.method ?? 'GET' });
    res.once('finish', () => end({ status: String(res.statusCode) }));
    (async () => {
      if (!OPEN.has(route.kind)) checkApiKey(r.headers, r.rawHeaders, o.apiKey);
      await control(ctx, r, res, route);
    })().catch((err: unknown) => {
      if (!(err instanceof Error && 'kind' in err))
        ctx.logger.error({ err, url: r.url }, 'gateway request failed');
      sendError(res, err);
    });
  }, o.tls);
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const traffic = routeRequest(req.url ?? '/', req.headers, o.domains);
    if (traffic) void handleTrafficUpgrade(ctx, req, socket, head, traffic);
    else socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
  });
  return server;
}
