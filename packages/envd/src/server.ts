import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { Filesystem, Process } from '@agentenv/protocol';
import type { Logger } from 'pino';
import { BootId } from './boot-id.js';
import { VolumeBinds } from './volumes.js';
import { EnvdError, invalidArgument } from './errors.js';
import { filesystemService } from './filesystem/service.js';
import { handleEnvs, handleInit, handleMetrics } from './http/control.js';
import { handleFiles } from './http/files.js';
import { sendError, sendJson } from './http/respond.js';
import { refreshAfterRestores, refreshEventLoop } from './loop-refresh.js';
import { SystemMetrics } from './metrics.js';
import { ProcessManager } from './process/manager.js';
import { processService } from './process/service.js';
import { EnvdState } from './state.js';
import { startSudoService, type SudoService } from './sudo/service.js';

export interface EnvdOptions {
  port: number;
  host?: string;
  /** The user requests run as when they name none and /init has not set one. */
  defaultUser?: string;
  /** The Unix socket of the sudo service (see src/sudo/service.ts); none when omitted. */
  sudoSocket?: string;
  logger: Logger;
}

export interface RunningEnvd {
  server: Server;
  port: number;
  state: EnvdState;
  processes: ProcessManager;
  /** Undefined when not asked for, or when it could not start (envd runs without it). */
  sudo: SudoService | undefined;
  close(): Promise<void>;
}

const RPC_PREFIXES = ['/process.Process/', '/filesystem.Filesystem/'];

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** The Connect services, for the RPC paths. */
function rpcHandler(state: EnvdState, processes: ProcessManager) {
  return connectNodeAdapter({
    routes(router) {
      router.service(Process, processService(processes, state));
      router.service(Filesystem, filesystemService(state));
    },
    // Uploads go through /files; RPC messages are small.
    readMaxBytes: 16 << 20,
  });
}

/** The request's target as a URL; one that is none (`//`, `http://[`) is the client's error. */
function requestUrl(target: string): URL {
  if (!target.startsWith('/') || target.startsWith('//'))
    throw invalidArgument(`request target ${JSON.stringify(target.slice(0, 100))} is not a path`);
  return new URL(`http://envd${target}`);
}

/** Every route of envd, each behind the access token check it needs. */
function requestHandler(state: EnvdState, processes: ProcessManager, logger: Logger): Handler {
  const metrics = new SystemMetrics();
  const rpc = rpcHandler(state, processes);
  const bootId = new BootId(logger);
  const volumes = new VolumeBinds();
  return async (req, res) => {
    const url = requestUrl(req.url ?? '/');
    const key = `${req.method} ${url.pathname}`;
    if (key === 'GET /health') {
      // The node's readiness probe, its first call after every restore (a resume makes no /init):
      // drop any dead epoll interest the capture carried before the sandbox is handed out.
      refreshEventLoop(logger, 'health');
      res.writeHead(204).end();
      return;
    }
    if (RPC_PREFIXES.some((p) => url.pathname.startsWith(p))) {
      if (!state.tokenAccepted(req.headers['x-access-token'] as string | undefined)) {
        sendJson(res, 401, { code: 'unauthenticated', message: 'unauthorized access, invalid access token' });
        return;
      }
      rpc(req, res);
      return;
    }
    // /files checks a token or a URL signature itself; /init checks the current token itself.
    if (url.pathname === '/files') return handleFiles(req, res, url, state);
    if (key === 'POST /init') {
      // The node's first call after a restore: drop any dead epoll interest the capture carried
      // (see loop-refresh.ts) before the sandbox is handed out.
      refreshEventLoop(logger, 'init');
      return handleInit(req, res, state, bootId, volumes);
    }
    if (!state.tokenAccepted(req.headers['x-access-token'] as string | undefined)) {
      throw new EnvdError('unauthenticated', 'unauthorized access, please provide a valid access token');
    }
    if (key === 'GET /envs') return handleEnvs(res, state);
    if (key === 'GET /metrics') return handleMetrics(res, metrics);
    sendJson(res, 404, { code: 404, message: `no route for ${req.method} ${url.pathname}` });
  };
}

/** The HTTP server over `route`: a failed request is answered with its error, never left open. */
function httpServer(route: Handler, logger: Logger): Server {
  const server = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (!(err instanceof EnvdError)) logger.error({ err, url: req.url }, 'request failed');
      sendError(res, err);
    });
  });
  // Streams (process output, watches) may stay open for hours; the SDK sends keepalive headers.
  // No header timeout either: Node measures it on the monotonic clock, which jumps when a captured
  // sandbox is restored, and it then drops healthy kept-alive connections mid-request. envd is
  // reached through the node's proxy, which bounds what clients can hold open.
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  server.keepAliveTimeout = 75_000;
  return server;
}

/** The sudo service, or undefined when it cannot start: envd is still of use without it. */
function startSudo(socketPath: string, state: EnvdState, logger: Logger): Promise<SudoService | undefined> {
  return startSudoService({ socketPath, state, logger }).catch((err: unknown) => {
    logger.warn({ err, socket: socketPath }, 'sudo service not started');
    return undefined;
  });
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
}

export async function startEnvd(opts: EnvdOptions): Promise<RunningEnvd> {
  const state = new EnvdState({ defaultUser: opts.defaultUser ?? 'root' });
  const processes = new ProcessManager(state, opts.logger);
  const server = httpServer(requestHandler(state, processes, opts.logger), opts.logger);
  // Up before /health answers, so the first command of a sandbox can already use sudo.
  const sudo = opts.sudoSocket ? await startSudo(opts.sudoSocket, state, opts.logger) : undefined;
  await listen(server, opts.port, opts.host ?? '0.0.0.0').catch(async (err: unknown) => {
    await sudo?.close();
    throw err;
  });
  const stopRefreshing = refreshAfterRestores(opts.logger);
  const port = (server.address() as AddressInfo).port;
  opts.logger.info({ port }, 'envd listening');

  return {
    server,
    port,
    state,
    processes,
    sudo,
    async close() {
      stopRefreshing();
      processes.killAll();
      await sudo?.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
