import type { IncomingMessage, ServerResponse } from 'node:http';
import { clusterDashboardHandler } from '@agentenv/dashboard';
import { checkApiKey } from '@agentenv/common';
import { ask, type GatewayContext } from './context.js';
import { sendError } from './http.js';

/**
 * The web dashboard at /dashboard for the whole cluster: its pages, and its /dashboard/api
 * merged from every node (packages/dashboard), fed with what the gateway knows itself: the
 * scheduler's nodes and its lifecycle events. Same key and same errors as every gateway route.
 * Returns true when it took the request.
 */
export function gatewayDashboard(
  ctx: GatewayContext,
  apiKey: string,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  return clusterDashboardHandler({
    nodes: async () =>
      (await ask(() => ctx.scheduler.listNodes())).map((n) => ({
        nodeID: n.ref.nodeId,
        url: n.ref.url,
        status: n.ref.status,
        info: n.info,
      })),
    events: (signal, sandboxID) => ctx.scheduler.watchEvents(signal, sandboxID),
    authorize: (req) => checkApiKey(req.headers, req.rawHeaders, apiKey),
    streams: ctx.streams,
    sendError,
    log: (message, err) => ctx.logger.warn({ err }, message),
  });
}
