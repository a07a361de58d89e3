import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  checkApiKey,
  createEdgeServer,
  DomainError,
  normalizeTarget,
  routeRequest,
  type TlsFiles,
} from '@agentenv/common';
import type { GatewayContext } from './context.js';
import { gatewayDashboard } from './dashboard.js';
import { queryOf, sendError, sendJson } from './http.js';
import { handleEventStream, handleNode, handleNodes, handleSandboxEvents } from './handlers/cluster.js';
import { handleCreate } from './handlers/create.js';
import { handleFork } from './handlers/fork.js';
import { handleList } from './handlers/list.js';
import { handlePause } from './handlers/pause.js';
import { handleResume, handleSandboxCall, handleSnapshot } from './handlers/sandbox.js';
import { handleTemplate, handleAnyNode } from './handlers/shared.js';
import { handleTraffic, handleTrafficUpgrade } from './handlers/traffic.js';
import { handleVolumeCall, handleVolumeList } from './handlers/volumes.js';
import { classify, ROUTE_ACCESS, type ControlRoute } from './routing/classify.js';
import type { ClientRequest, ClientResponse } from './upstream/node-http.js';

const NOT_FOUND = 'HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n';

export interface GatewayServerOptions {
  apiKey: string;
  domains: readonly string[];
  tls?: TlsFiles;
}

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
    case 'pause':
      return handlePause(ctx, req, res, route.sandboxId);
    case 'sandbox':
      return handleSandboxCall(ctx, req, res, route.sandboxId);
    case 'template':
      return handleTemplate(ctx, req, res, route);
    case 'volumes':
      return handleVolumeList(ctx, req, res);
    case 'volume':
    case 'volume-content':
      return handleVolumeCall(ctx, req, res, route.probe);
    case 'any-node':
      return handleAnyNode(ctx, req, res);
  }
}

/**
 * A control request, on its normalised target (which the dashboard, the key check, routing and
 * the node it is forwarded to all see): the key is checked by the route it matched.
 */
function controlRequest(
  ctx: GatewayContext,
  o: GatewayServerOptions,
  dashboard: (req: ClientRequest, res: ClientResponse) => boolean,
) {
  return (r: ClientRequest, res: ClientResponse) => {
    r.url = normalizeTarget(r.url ?? '/');
    if (dashboard(r, res)) return;
    const route = classify(r.method ?? 'GET', r.url);
    const end = ctx.metrics.requestDuration.startTimer({ route: route.kind, method: r.method ?? 'GET' });
    res.once('finish', () => end({ status: String(res.statusCode) }));
    (async () => {
      if (ROUTE_ACCESS[route.kind] !== 'public') checkApiKey(r.headers, r.rawHeaders, o.apiKey);
      await control(ctx, r, res, route);
    })().catch((err: unknown) => failed(ctx, r, res, err));
  };
}

/** A request's failure as its answer (logged when it is not a refusal), never the process's. */
function failed(ctx: GatewayContext, r: IncomingMessage, res: ClientResponse, err: unknown): void {
  if (!(err instanceof DomainError)) ctx.logger.error({ err, url: r.url }, 'gateway request failed');
  try {
    sendError(res, err);
  } catch {
    res.destroy();
  }
}

/**
 * The gateway's one listener: sandbox traffic (recognised exactly as a node does, on the target
 * as sent) is streamed to the sandbox's node; everything else is the control plane. Whatever a
 * request makes throw is that request's answer: no request can stop the gateway.
 */
export function createGatewayServer(ctx: GatewayContext, o: GatewayServerOptions): Server {
  const control = controlRequest(ctx, o, gatewayDashboard(ctx, o.apiKey));
  const server = createEdgeServer((req, res) => {
    const r = req as ClientRequest;
    try {
      const traffic = routeRequest(r.url ?? '/', r.headers, o.domains);
      if (traffic) handleTraffic(ctx, r, res, traffic).catch((err: unknown) => failed(ctx, r, res, err));
      else control(r, res);
    } catch (err) {
      failed(ctx, r, res, err);
    }
  }, o.tls);
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // The HTTP server lets go of an upgraded socket: a client's reset must not be unhandled.
    socket.on('error', () => socket.destroy());
    // The traffic handler answers what it refuses; what escapes it is a bug, and cuts the socket.
    const refuse = (err: unknown) => {
      ctx.logger.error({ err, url: req.url }, 'gateway upgrade failed');
      socket.destroy();
    };
    try {
      const traffic = routeRequest(req.url ?? '/', req.headers, o.domains);
      if (traffic) handleTrafficUpgrade(ctx, req, socket, head, traffic).catch(refuse);
      else socket.end(NOT_FOUND);
    } catch (err) {
      refuse(err);
    }
  });
  return server;
}
