import { Agent, request, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { forwardHeaders, safeEqual, type SandboxRoute } from '@agentenv/common';
import { ENVD_PORT } from '@agentenv/protocol';
import { isTransient, type Orchestrator } from '../orchestrator/index.js';

/** Proxy auto-resume guarantees at least this much life (AGENTENV-API.md §2). */
const AUTO_RESUME_SECS = 300;

type Outcome = { address: string } | { status: number; body: Record<string, unknown> };

/**
 * Sandbox traffic: forwards HTTP (streamed both ways, SSE included) and WebSocket upgrades to
 * `hostAddress:port` of the sandbox. It owns every host→sandbox connection, so before a
 * capture it can close them all (gVisor cannot save established external connections).
 */
export class SandboxProxy {
  private readonly agents = new Map<string, Agent>();
  private readonly upgraded = new Map<string, Set<Socket>>();

  constructor(
    private readonly orch: Orchestrator,
    private readonly logger: Logger,
  ) {}

  private agent(id: string): Agent {
    let a = this.agents.get(id);
    if (!a)
      this.agents.set(id, (a = new Agent({ keepAlive: true, keepAliveMsecs: 1000, maxFreeSockets: 16 })));
    return a;
  }

  /** Closes every connection into the sandbox (in-flight requests fail with 502). */
  async drain(id: string): Promise<void> {
    this.agents.get(id)?.destroy();
    this.agents.delete(id);
    for (const s of this.upgraded.get(id) ?? []) s.destroy();
    this.upgraded.delete(id);
  }

  private async resolve(route: SandboxRoute, headers: IncomingMessage['headers']): Promise<Outcome> {
    const notFound = {
      status: 502,
      body: { sandboxId: route.sandboxId, message: 'The sandbox was not found', code: 502 },
    };
    if (!route.sandboxId || !route.port) {
      return {
        status: 400,
        body: { code: 400, message: 'sandbox routing needs a sandbox id and a port (1-65535)' },
      };
    }
    let rec = this.orch.find(route.sandboxId);
    if (!rec) return notFound;
    if (isTransient(rec.state)) {
      await this.orch.settled(rec.sandboxId);
      rec = this.orch.find(route.sandboxId);
      if (!rec) return notFound;
    }
    if (rec.state === 'paused') {
      if (!rec.autoResume) {
        return route.native
          ? { status: 410, body: { code: 410, message: `sandbox ${rec.sandboxId} is paused` } }
          : notFound;
      }
      await this.orch.connect(rec.sandboxId, AUTO_RESUME_SECS);
    }
    if (route.port !== ENVD_PORT && rec.trafficAccessToken) {
      const given = headers['e2b-traffic-access-token'];
      if (typeof given !== 'string' || !safeEqual(given, rec.trafficAccessToken)) {
        return { status: 403, body: { code: 403, message: 'missing or invalid traffic access token' } };
      }
    }
    const target = this.orch.target(rec.sandboxId);
    return target ? { address: target.address } : notFound;
  }

  async handle(route: SandboxRoute, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const outcome = await this.resolve(route, req.headers).catch((err: Error) => ({
      status: 502,
      body: { sandboxId: route.sandboxId, message: `sandbox unavailable: ${err.message}`, code: 502 },
    }));
    if ('status' in outcome) return sendJson(res, outcome.status, outcome.body);
    const body = await replayableBody(req);
    let upstream: ClientRequest | undefined;
    res.once('close', () => {
      if (!res.writableFinished) upstream?.destroy();
    });
    const send = (attempt: number) => {
      upstream = request({
        host: outcome.address,
        port: route.port,
        method: req.method,
        path: route.path,
        headers: forwardHeaders(req.headers, false),
        agent: this.agent(route.sandboxId),
      });
      upstream.on('response', (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        // Server-sent events and streamed RPC output must reach the client as they are produced.
        res.flushHeaders();
        up.pipe(res);
        up.on('error', () => res.destroy());
      });
      upstream.on('error', (err: NodeJS.ErrnoException) => {
        const ctx = { err, sandboxId: route.sandboxId, port: route.port, path: route.path };
        // A connection closed before any answer: the request never reached the handler, so when
        // it can be sent again it is. Seen with a kept-alive socket the sandbox closed, and with
        // sandboxes restored from a capture that carried a dead epoll interest in envd (envd now
        // rebuilds its epoll instance after a restore, see packages/envd/src/loop-refresh.ts).
        if (attempt < RESEND_DELAYS_MS.length && body && !res.headersSent && err.code === 'ECONNRESET') {
          this.logger.debug(ctx, 'proxy upstream reset before answering; sending again');
          setTimeout(() => {
            if (!res.destroyed) send(attempt + 1);
          }, RESEND_DELAYS_MS[attempt]);
          return;
        }
        this.logger.debug(ctx, 'proxy upstream error');
        if (!res.headersSent) {
          sendJson(res, 502, {
            sandboxId: route.sandboxId,
            message: `sandbox connection failed: ${err.message}`,
            code: 502,
          });
        } else res.destroy();
      });
      if (body) upstream.end(body);
      else req.pipe(upstream);
    };
    send(0);
  }

  async upgrade(route: SandboxRoute, req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    const outcome = await this.resolve(route, req.headers).catch(() => ({ status: 502, body: {} }));
    if ('status' in outcome) {
      socket.end(`HTTP/1.1 ${outcome.status} Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
      return;
    }
    const upstream = request({
      host: outcome.address,
      port: route.port,
      method: req.method,
      path: route.path,
      headers: forwardHeaders(req.headers, true),
    });
    upstream.on('upgrade', (up, upSocket, upHead) => {
      const lines = [`HTTP/1.1 ${up.statusCode} ${up.statusMessage}`];
      for (let i = 0; i < up.rawHeaders.length; i += 2)
        lines.push(`${up.rawHeaders[i]}: ${up.rawHeaders[i + 1]}`);
      socket.write(lines.join('\r\n') + '\r\n\r\n');
      if (upHead.length) socket.write(upHead);
      if (head.length) upSocket.write(head);
      const set = this.upgraded.get(route.sandboxId) ?? new Set<Socket>();
      this.upgraded.set(route.sandboxId, set.add(upSocket));
      upSocket.on('close', () => set.delete(upSocket));
      upSocket.on('error', () => socket.destroy());
      upSocket.pipe(socket).pipe(upSocket);
      socket.on('close', () => upSocket.destroy());
    });
    upstream.on('response', (up) => {
      socket.end(
        `HTTP/1.1 ${up.statusCode} ${up.statusMessage}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`,
      );
      up.resume();
    });
    upstream.on('error', () => socket.destroy());
    upstream.end();
  }

  close(): void {
    for (const id of [...this.agents.keys(), ...this.upgraded.keys()]) void this.drain(id);
  }
}

/** Pauses before sending a request again whose connection was reset before any answer. */
const RESEND_DELAYS_MS = [100, 300, 800, 1500];

/** Requests up to this size are read whole first, so they can be sent again. */
const REPLAYABLE_BYTES = 256 * 1024;

/** The whole body of a small request (empty when it has none); undefined for one to stream. */
async function replayableBody(req: IncomingMessage): Promise<Buffer | undefined> {
  if (req.headers['transfer-encoding']) return undefined;
  if (Number(req.headers['content-length'] ?? 0) > REPLAYABLE_BYTES) return undefined;
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function sendJson(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  if (res.headersSent) return void res.destroy();
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}
