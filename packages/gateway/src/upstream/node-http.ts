import {
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Duplex } from 'node:stream';
import {
  DomainError,
  holdUntilUpgraded,
  isConnectStream,
  peerLookup,
  rawAnswerHead,
  relayConnectStream,
  spliceUpgrade,
  type StreamError,
} from '@agentenv/common';
import type { NodeRef } from '../scheduler/scheduler.js';
import { rawRequestHeaders } from './headers.js';
import { readPastReset } from './read-past-reset.js';

/**
 * A client's request and response. Over HTTP/2 they are the compat objects, handed on as these
 * by the edge server (which keeps HTTP/1-only headers out of HTTP/2 answers).
 */
export type ClientRequest = IncomingMessage;
export type ClientResponse = ServerResponse;

/** A node's answer read whole (control calls whose body the gateway needs). */
export interface NodeAnswer {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export interface NodeCall {
  method: string;
  path: string;
  /** An object, or a flat `[name, value, …]` list sent with its names as spelled. */
  headers: OutgoingHttpHeaders | string[];
  body?: Buffer;
  /** No answer within this → 504; undefined = wait as long as it takes. */
  timeoutMs?: number;
}

/**
 * HTTP to the nodes: kept-alive connections per node, requests streamed both ways (SSE, Connect
 * streams, uploads), WebSocket upgrades spliced. A node that cannot be reached is a 502, one
 * that does not answer in time a 504, each naming the node.
 */
export class NodeHttp {
  private readonly agents = new Map<string, HttpAgent>();

  private agent(url: URL): HttpAgent {
    let a = this.agents.get(url.origin);
    if (!a) {
      // Nodes' names are looked up off libuv's pool, once at a time each (see PeerLookup).
      const opts = { keepAlive: true, keepAliveMsecs: 1000, maxFreeSockets: 64, lookup: peerLookup.lookup };
      a = url.protocol === 'https:' ? new HttpsAgent(opts) : new HttpAgent(opts);
      const connect = a.createConnection.bind(a);
      a.createConnection = (options, cb) => {
        const socket = connect(options, cb);
        return socket && readPastReset(socket);
      };
      this.agents.set(url.origin, a);
    }
    return a;
  }

  private open(node: NodeRef, call: NodeCall) {
    const url = new URL(node.url);
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return send({
      protocol: url.protocol,
      hostname: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || (url.protocol === 'https:' ? 443 : 80),
      method: call.method,
      path: call.path,
      headers: call.headers,
      agent: this.agent(url),
    });
  }

  /** Sends a call and reads the whole answer. */
  call(node: NodeRef, call: NodeCall, retried = false): Promise<NodeAnswer> {
    return new Promise((resolve, reject) => {
      const up = this.open(node, call);
      const timer = call.timeoutMs
        ? setTimeout(() => up.destroy(timeoutError(node, call.timeoutMs!)), call.timeoutMs)
        : undefined;
      up.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) });
        });
        res.on('error', (err) => reject(upstreamError(node, err)));
      });
      up.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        // A kept-alive connection the node closed as this call went out: the call never reached
        // it, and its whole body is at hand, so it is sent once more on a fresh connection.
        if (!retried && up.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE'))
          return void this.call(node, call, true).then(resolve, reject);
        reject(upstreamError(node, err));
      });
      up.end(call.body);
    });
  }

  /**
   * Streams a client's request to a node and the answer back, unbuffered and with no time limit
   * once the node answers. Rejects (nothing sent yet) when the node cannot be reached or does not
   * answer within `headerTimeoutMs`; after the headers, a broken stream just ends the response.
   */
  stream(
    node: NodeRef,
    req: ClientRequest,
    res: ClientResponse,
    opts: { tls: boolean; path?: string; extraHeaders?: Record<string, string>; headerTimeoutMs?: number },
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      const up = this.open(node, {
        method: req.method ?? 'GET',
        path: opts.path ?? req.url ?? '/',
        headers: rawRequestHeaders(req, {
          upgrade: false,
          tls: opts.tls,
          ...(opts.extraHeaders ? { extra: opts.extraHeaders } : {}),
        }),
      });
      const timer = opts.headerTimeoutMs
        ? setTimeout(() => up.destroy(timeoutError(node, opts.headerTimeoutMs!)), opts.headerTimeoutMs)
        : undefined;
      res.once('close', () => {
        if (!res.writableFinished) up.destroy();
      });
      up.on('response', (upRes) => {
        clearTimeout(timer);
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        // Server-sent events and streamed RPC output must reach the client as they are produced.
        res.flushHeaders();
        // A Connect stream (a command's output) ends as one even when the node's side breaks.
        if (isConnectStream(upRes.headers)) relayConnectStream(upRes, res, nodeLost(node));
        else {
          upRes.pipe(res);
          upRes.on('error', () => res.destroy());
        }
        upRes.on('close', () => resolve());
      });
      up.on('error', (err) => {
        clearTimeout(timer);
        if (res.headersSent) {
          res.destroy();
          resolve();
        } else reject(err instanceof DomainError ? err : upstreamError(node, err));
      });
      req.pipe(up);
    });
  }

  /** Splices a WebSocket (or any HTTP/1.1 upgrade) between the client and a node. */
  upgrade(
    node: NodeRef,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    opts: { tls: boolean; extraHeaders?: Record<string, string> },
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      const up = this.open(node, {
        method: req.method ?? 'GET',
        path: req.url ?? '/',
        headers: rawRequestHeaders(req, {
          upgrade: true,
          tls: opts.tls,
          ...(opts.extraHeaders ? { extra: opts.extraHeaders } : {}),
        }),
      });
      // A client gone before the node answered leaves nothing open on the node for it.
      const held = holdUntilUpgraded(socket, () => up.destroy());
      up.on('upgrade', (upRes, upSocket, upHead) => {
        spliceUpgrade(socket, Buffer.concat([head, held.take()]), upRes, upSocket, upHead);
        resolve();
      });
      // Refused: the answer, delimited by the connection's end since its body is de-chunked.
      up.on('response', (upRes) => {
        held.take();
        socket.resume();
        socket.once('close', () => upRes.destroy());
        socket.write(
          rawAnswerHead(upRes, {
            first: ['connection: close'],
            keep: (name) => name !== 'transfer-encoding' && name !== 'connection',
          }),
        );
        upRes.pipe(socket);
        resolve();
      });
      up.on('error', (err) => reject(upstreamError(node, err)));
      up.end();
    });
  }

  close(): void {
    for (const a of this.agents.values()) a.destroy();
    this.agents.clear();
  }
}

function upstreamError(node: NodeRef, err: Error): DomainError {
  if (err instanceof DomainError) return err;
  const code = (err as NodeJS.ErrnoException).code ?? err.message;
  return new DomainError('bad_gateway', `node ${node.nodeId} (${node.url}) is unreachable: ${code}`);
}

function timeoutError(node: NodeRef, ms: number): DomainError {
  return new DomainError('timeout', `node ${node.nodeId} did not answer within ${Math.round(ms / 1000)} s`);
}

/** How a client's Connect stream ends when the node's side of it breaks. */
function nodeLost(node: NodeRef): StreamError {
  return { code: 'unavailable', message: `the connection to node ${node.nodeId} was lost` };
}
