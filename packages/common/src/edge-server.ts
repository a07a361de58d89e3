import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';

/** PEM files of an edge server's certificate (chain) and key (`tls_cert`, `tls_key`). */
export interface TlsFiles {
  certPath: string;
  keyPath: string;
}

/** The files of a config's `tls_cert`/`tls_key`, when both are set. */
export function tlsFiles(c: { tlsCert?: string; tlsKey?: string }): TlsFiles | undefined {
  return c.tlsCert && c.tlsKey ? { certPath: c.tlsCert, keyPath: c.tlsKey } : undefined;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** HTTP/1 headers that HTTP/2 forbids (RFC 9113 §8.2.2); a relayed HTTP/1 answer carries them. */
const CONNECTION_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/**
 * Shows an HTTP/2 request's headers as HTTP/1 ones: no pseudo-headers (a proxy would pass them
 * on, and they are not valid header names), `:authority` as Host (sandbox hosts route by it).
 */
function presentAsHttp1(req: Http2ServerRequest): void {
  const headers: Record<string, string | string[] | undefined> = {};
  for (const [k, v] of Object.entries(req.headers)) if (!k.startsWith(':')) headers[k] = v;
  headers.host ??= req.headers[':authority'];
  Object.defineProperty(req, 'headers', { value: headers, configurable: true });
}

/**
 * Lets an HTTP/1-minded handler answer an HTTP/2 request: the compat response throws on
 * connection-specific headers, which a proxied answer has, so they are dropped here.
 */
function tolerateHttp1Headers(res: Http2ServerResponse): void {
  const setHeader = res.setHeader.bind(res);
  res.setHeader = (name, value) =>
    CONNECTION_HEADERS.has(name.toLowerCase()) ? res : setHeader(name, value);
  const writeHead = res.writeHead.bind(res) as (status: number, headers?: object) => Http2ServerResponse;
  res.writeHead = ((status: number, ...rest: unknown[]) => {
    const headers = rest.find((r) => r && typeof r === 'object') as Record<string, unknown> | undefined;
    if (!headers) return writeHead(status);
    const kept = Object.fromEntries(
      Object.entries(headers).filter(([k]) => !CONNECTION_HEADERS.has(k.toLowerCase())),
    );
    return writeHead(status, kept);
  }) as Http2ServerResponse['writeHead'];
}

/**
 * Lets `close()` drop connections that have not sent a request yet. Node counts such a connection
 * as busy, not idle, so a close (a node's stop) waited for it up to `headersTimeout`, a minute,
 * whenever a client had opened one ahead of need; what is mid-request still finishes.
 */
function closeDropsSilentConnections(server: Server): void {
  const silent = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    silent.add(socket);
    socket.once('close', () => silent.delete(socket));
  });
  const spoke = (req: IncomingMessage) => silent.delete(req.socket);
  server.on('request', spoke);
  server.on('upgrade', spoke);
  const close = server.close.bind(server);
  server.close = (callback?: (err?: Error) => void) => {
    for (const socket of silent) socket.destroy();
    return close(callback);
  };
}

/**
 * The server of an edge listener: plain HTTP/1.1, or with `tls` TLS offering HTTP/2 by ALPN and
 * HTTP/1.1 to clients that do not ask for it (WebSocket upgrades arrive as HTTP/1.1 `upgrade`
 * events either way). Neither cuts off long requests: proxied streams have no time limit.
 */
export function createEdgeServer(handler: Handler, tls?: TlsFiles): Server {
  if (!tls) {
    const server = createServer(handler);
    server.requestTimeout = 0;
    server.keepAliveTimeout = 75_000;
    closeDropsSilentConnections(server);
    return server;
  }
  const server = createSecureServer(
    { cert: readFileSync(tls.certPath), key: readFileSync(tls.keyPath), allowHTTP1: true },
    (req: Http2ServerRequest, res: Http2ServerResponse) => {
      if (req.httpVersionMajor === 2) {
        presentAsHttp1(req);
        tolerateHttp1Headers(res);
      }
      handler(req as unknown as IncomingMessage, res as unknown as ServerResponse);
    },
  );
  server.setTimeout(0);
  // Callers use the upgrade event and listen/close, which both servers have.
  return server as unknown as Server;
}
