import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { createEdgeServer, DomainError, notFound, tlsFiles } from '@agentenv/common';
import type { NodeConfig } from '../config/index.js';
import type { Orchestrator } from '../orchestrator/index.js';
import {
  errorResponseText,
  routeRequest,
  sendError,
  signedFilesRoute,
  type SandboxProxy,
  type SandboxRoute,
} from '../proxy/index.js';

export interface EdgeDeps {
  config: NodeConfig;
  orchestrator: Orchestrator;
  proxy: SandboxProxy;
  logger: Logger;
}

/**
 * Whatever a request makes throw is its own answer (the error's status; a bug is a 500 and is
 * logged), never an exception that reaches the process: one bad request must not stop a node.
 */
function answerFailure(logger: Logger, res: ServerResponse, err: unknown, what: string): void {
  // A client that went away mid-request is no failure of the node's.
  if (!(err instanceof DomainError) && !res.destroyed) logger.error({ err }, what);
  try {
    sendError(res, err);
  } catch {
    res.destroy();
  }
}

function refuseUpgrade(logger: Logger, socket: Duplex, err: unknown): void {
  if (!(err instanceof DomainError)) logger.error({ err }, 'upgrade failed before routing');
  if (socket.writable) socket.end(errorResponseText(err));
  else socket.destroy();
}

/** The HTTP(S) server: sandbox traffic and upgrades to the proxy, the rest to Fastify. */
export function edgeServerFactory(deps: EdgeDeps) {
  const domains = deps.config.sandboxProxy.domains;
  const log = deps.logger;
  const sandboxRoute = (req: IncomingMessage): SandboxRoute | 'no-match' | undefined =>
    routeRequest(req.url ?? '/', req.headers, domains) ??
    signedFilesRoute(req.url ?? '/', req.method, () => deps.orchestrator.list());
  return (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
    const server = createEdgeServer((req, res) => {
      try {
        const route = sandboxRoute(req);
        // A signed /files URL that no sandbox's token produced: what envd answers for a forged one.
        if (route === 'no-match') sendError(res, new DomainError('unauthorized', 'invalid signature'));
        else if (route)
          deps.proxy
            .handle(route, req, res)
            .catch((err) => answerFailure(log, res, err, 'sandbox traffic failed'));
        else handler(req, res);
      } catch (err) {
        answerFailure(log, res, err, 'request failed before routing');
      }
    }, tlsFiles(deps.config));
    server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      // The HTTP server lets go of an upgraded socket: a client's reset must not be unhandled.
      socket.on('error', () => socket.destroy());
      try {
        const route = routeRequest(req.url ?? '/', req.headers, domains);
        if (route)
          deps.proxy.upgrade(route, req, socket, head).catch((err) => refuseUpgrade(log, socket, err));
        else
          refuseUpgrade(
            log,
            socket,
            notFound(`no route for an upgrade of ${(req.url ?? '/').split('?')[0]}`),
          );
      } catch (err) {
        refuseUpgrade(log, socket, err);
      }
    });
    // Proxied streams and long operations (fork, pause of big sandboxes) are not cut off there.
    return server;
  };
}
