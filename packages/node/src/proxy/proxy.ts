import {
  Agent,
  request,
  STATUS_CODES,
  type ClientRequest,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import {
  DomainError,
  errorBody,
  errorHeaders,
  forwardHeaders,
  safeEqual,
  type SandboxRoute,
} from '@agentenv/common';
import { ENVD_PORT } from '@agentenv/protocol';
import { isTransient, type Orchestrator } from '../orchestrator/index.js';

/** Proxy auto-resume guarantees at least this much life (AGENTENV-API.md §2). */
const AUTO_RESUME_SECS = 300;

/** What the proxy needs of the orchestrator. */
export type ProxyTargets = Pick<
  Orchestrator,
  'find' | 'settled' | 'connect' | 'resumeForMemory' | 'target' | 'activity' | 'wake'
>;

/**
 * E2B's answer for traffic to a sandbox that is unknown, gone or paused without auto-resume
 * (E2B-COMPAT.md §1): the SDK's isRunning() reads it as "not running".
 */
export function sandboxNotFound(sandboxId: string): DomainError {
  return new DomainError('bad_gateway', 'The sandbox was not found', undefined, { details: { sandboxId } });
}

/**
 * Sandbox traffic: forwards HTTP (streamed both ways, SSE included) and WebSocket upgrades to
 * `hostAddress:port` of the sandbox. It owns every host→sandbox connection, so before a
 * capture it can close them all (gVisor cannot save established external connections).
 */
export class SandboxProxy {
  private readonly agents = new Map<string, Agent>();
  private readonly upgraded = new Map<string, Set<Socket>>();

  constructor(
    private readonly orch: ProxyTargets,
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

  /**
   * Where a request for `route` goes: the running sandbox's host-side address. Waits for an
   * operation under way; resumes a paused sandbox with autoResume. Throws the answer otherwise
   * (a DomainError: unknown or paused sandbox, bad routing, a missing traffic token, or why the
   * auto-resume was refused).
   */
  async resolve(route: SandboxRoute, headers: IncomingMessage['headers']): Promise<{ address: string }> {
    if (!route.sandboxId || !route.port)
      throw new DomainError('invalid', 'sandbox routing needs a sandbox id and a port (1-65535)');
    let rec = this.orch.find(route.sandboxId);
    if (rec && isTransient(rec.state)) {
      await this.orch.settled(rec.sandboxId);
      rec = this.orch.find(route.sandboxId);
    }
    if (!rec) throw sandboxNotFound(route.sandboxId);
    if (rec.state === 'paused') {
      if (!rec.autoResume && !rec.pausedForMemory)
        throw route.native
          ? new DomainError('gone', `sandbox ${rec.sandboxId} is paused`)
          : sandboxNotFound(rec.sandboxId);
      // A cold boot loses what ran inside: only an explicit connect or resume may do it.
      if (rec.pauseKind === 'filesystem')
        throw route.native
          ? new DomainError('conflict', 'filesystem-only snapshot must be resumed explicitly')
          : sandboxNotFound(rec.sandboxId);
      const id = rec.sandboxId;
      // One paused for memory keeps its end time; autoResume gives AUTO_RESUME_SECS.
      await (
        rec.pausedForMemory
          ? this.orch.resumeForMemory(id)
          : this.orch.connect(id, AUTO_RESUME_SECS, { reason: 'auto_resume' })
      ).catch((err: unknown) => {
        // Resumed on another node meanwhile: not here, as for any unknown sandbox.
        throw err instanceof DomainError && err.kind === 'not_found' ? sandboxNotFound(route.sandboxId) : err;
      });
    }
    if (route.port !== ENVD_PORT && rec.trafficAccessToken) {
      const given = headers['e2b-traffic-access-token'];
      if (typeof given !== 'string' || !safeEqual(given, rec.trafficAccessToken))
        throw new DomainError('forbidden', 'missing or invalid traffic access token');
    }
    // A sandbox frozen for idleness runs again before the request reaches it.
    await this.orch.wake(rec.sandboxId);
    const target = this.orch.target(rec.sandboxId);
    if (!target) throw sandboxNotFound(route.sandboxId);
    return { address: target.address };
  }

  async handle(route: SandboxRoute, req: IncomingMessage, res: ServerResponse): Promise<void> {
    let outcome: { address: string };
    try {
      outcome = await this.resolve(route, req.headers);
    } catch (err) {
      return sendError(res, err);
    }
    // Open until the answer is sent or the client leaves: a streamed command counts as activity.
    res.once('close', this.orch.activity.begin(route.sandboxId));
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
        sendError(
          res,
          new DomainError('bad_gateway', `sandbox connection failed: ${err.message}`, undefined, {
            details: { sandboxId: route.sandboxId },
          }),
        );
      });
      if (body) upstream.end(body);
      else req.pipe(upstream);
    };
    send(0);
  }

  async upgrade(route: SandboxRoute, req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    let outcome: { address: string };
    try {
      outcome = await this.resolve(route, req.headers);
    } catch (err) {
      socket.end(errorResponseText(err));
      return;
    }
    socket.once('close', this.orch.activity.begin(route.sandboxId));
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

/** An error as the one mapping words it (@agentenv/common); mid-answer, the connection is cut. */
export function sendError(res: ServerResponse, err: unknown): void {
  if (res.headersSent) return void res.destroy();
  const r = errorBody(err);
  const data = JSON.stringify(r.body);
  res.writeHead(r.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(data),
    ...errorHeaders(r),
  });
  res.end(data);
}

/** The same answer written on the raw socket of a refused WebSocket upgrade. */
export function errorResponseText(err: unknown): string {
  const r = errorBody(err);
  const data = JSON.stringify(r.body);
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(data)),
    connection: 'close',
    ...errorHeaders(r),
  };
  const lines = [`HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? ''}`];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return `${lines.join('\r\n')}\r\n\r\n${data}`;
}
