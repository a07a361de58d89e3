import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { ask, type GatewayContext } from '../context.js';
import { DomainError, errorBody, nodeOnlyEnvdRefusal, type SandboxRoute } from '@agentenv/common';
import { ENVD_PORT } from '@agentenv/protocol';
import { sendJson } from '../http.js';
import type { Binding } from '../scheduler/scheduler.js';
import type { ClientRequest, ClientResponse } from '../upstream/node-http.js';

/** E2B's answer for traffic to a sandbox that is not there (E2B-COMPAT.md §1). */
const notFoundBody = (sandboxId: string) => ({ sandboxId, message: 'The sandbox was not found', code: 502 });

/**
 * Routing headers for the node: a request routed by its Host (`{port}-{id}.{domain}`) is sent
 * with E2B's headers, so nodes need not know the gateway's domains. Header and /proxy/ routes
 * go as they came.
 */
function routingHeaders(req: ClientRequest, route: SandboxRoute): Record<string, string> | undefined {
  const hasHeaders = req.headers['e2b-sandbox-id'] ?? req.headers['x-agentenv-sandbox-id'];
  if (hasHeaders || route.native) return undefined;
  return { 'e2b-sandbox-id': route.sandboxId, 'e2b-sandbox-port': String(route.port) };
}

async function bindingFor(ctx: GatewayContext, route: SandboxRoute): Promise<Binding | undefined> {
  if (!route.sandboxId || !route.port) return undefined;
  const b = await ask(() => ctx.scheduler.lookupNode(route.sandboxId));
  return b && b.state !== 'lost' ? b : undefined;
}

/** Sandbox traffic (HTTP, SSE, Connect streams) to the sandbox's node, without a time limit. */
export async function handleTraffic(
  ctx: GatewayContext,
  req: ClientRequest,
  res: ClientResponse,
  route: SandboxRoute,
): Promise<void> {
  if (!route.sandboxId || !route.port)
    return sendJson(res, 400, {
      code: 400,
      message: 'sandbox routing needs a sandbox id and a port (1-65535)',
    });
  // Refused here too, before the sandbox is looked up: a node refuses it as well.
  const refusal = nodeOnlyEnvdRefusal(route, ENVD_PORT);
  if (refusal) throw refusal;
  const b = await bindingFor(ctx, route);
  if (!b) return sendJson(res, 502, notFoundBody(route.sandboxId));
  const extra = routingHeaders(req, route);
  await ctx.nodes.stream(b.node, req, res, { tls: ctx.tls, ...(extra ? { extraHeaders: extra } : {}) });
}

/** A WebSocket (or other upgrade) to a sandbox port, spliced through the sandbox's node. */
export async function handleTrafficUpgrade(
  ctx: GatewayContext,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  route: SandboxRoute,
): Promise<void> {
  socket.on('error', () => socket.destroy());
  try {
    const refusal = nodeOnlyEnvdRefusal(route, ENVD_PORT);
    if (refusal) throw refusal;
    const b = await bindingFor(ctx, route);
    if (!b) throw new DomainError('bad_gateway', `sandbox ${route.sandboxId} was not found`);
    const extra = routingHeaders(req, route);
    await ctx.nodes.upgrade(b.node, req, socket, head, {
      tls: ctx.tls,
      ...(extra ? { extraHeaders: extra } : {}),
    });
  } catch (err) {
    const { status, body } = errorBody(err);
    const data = JSON.stringify(body);
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nconnection: close\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(data)}\r\n\r\n${data}`,
    );
  }
}
