import { Agent, request, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import {
  DomainError,
  forwardHeaders,
  holdUntilUpgraded,
  isConnectStream,
  relayConnectStream,
  rawAnswerHead,
  spliceUpgrade,
  type StreamError,
  statusBody,
  type SandboxRoute,
} from '@agentenv/common';
import { isTransient, type Orchestrator } from '../orchestrator/index.js';
import { authorize, refuseNodeOnly } from './access.js';
import { cutError, type StreamCut } from './stream-cuts.js';
import { errorResponseText, sandboxNotFound, sendAnswer, sendError } from './answers.js';
import { clientHeaders, maskedHost } from './headers.js';
import { bodyDeadline, isReplayable, readBody } from './request-body.js';

/** Proxy auto-resume guarantees at least this much life (AGENTENV-API.md §2). */
const AUTO_RESUME_SECS = 300;

/** Longest a client may pause while sending a request body before it is answered 408. */
const BODY_IDLE_MS = 60_000;

/** What the proxy needs of the orchestrator. */
export type ProxyTargets = Pick<
  Orchestrator,
  'find' | 'settled' | 'connect' | 'resumeForMemory' | 'target' | 'activity' | 'wake'
>;

/** Where a resolved request goes: the sandbox's host-side address, and the Host it is to see. */
interface Upstream {
  address: string;
  host: string | undefined;
}

/**
 * Sandbox traffic: forwards HTTP (streamed both ways, SSE included) and WebSocket upgrades to
 * `hostAddress:port` of the sandbox. It owns every host→sandbox connection, so before a
 * capture it can close them all (gVisor cannot save established external connections).
 */
export class SandboxProxy {
  private readonly agents = new Map<string, Agent>();
  private readonly upgraded = new Map<string, Set<Socket>>();
  /** The cut of each Connect stream open into a sandbox (relayConnectStream). */
  private readonly streams = new Map<string, Set<(error: StreamError) => void>>();
  private readonly bodyIdleMs: number;

  constructor(
    private readonly orch: ProxyTargets,
    private readonly logger: Logger,
    opts: { bodyIdleMs?: number } = {},
  ) {
    this.bodyIdleMs = opts.bodyIdleMs ?? BODY_IDLE_MS;
  }

  private agent(id: string): Agent {
    let a = this.agents.get(id);
    if (!a)
      this.agents.set(id, (a = new Agent({ keepAlive: true, keepAliveMsecs: 1000, maxFreeSockets: 16 })));
    return a;
  }

  /**
   * Closes every connection into the sandbox: a request not yet answered fails with 502, a
   * Connect stream (a command's output) ends with the error `why` gives it.
   */
  async drain(id: string, why: StreamCut): Promise<void> {
    for (const cut of this.streams.get(id) ?? []) cut(cutError(id, why));
    this.streams.delete(id);
    this.agents.get(id)?.destroy();
    this.agents.delete(id);
    for (const s of this.upgraded.get(id) ?? []) s.destroy();
    this.upgraded.delete(id);
  }

  /**
   * Where a request for `route` goes: the running sandbox's host-side address. Waits for an
   * operation under way; checks the request's credentials, and only then resumes a paused
   * sandbox with autoResume or wakes a frozen one. Throws the answer otherwise (a DomainError:
   * unknown or paused sandbox, bad routing, a node-only envd path, a missing traffic token, or
   * why the auto-resume was refused).
   */
  async resolve(route: SandboxRoute, req: Pick<IncomingMessage, 'headers' | 'method'>): Promise<Upstream> {
    if (!route.sandboxId || !route.port)
      throw new DomainError('invalid', 'sandbox routing needs a sandbox id and a port (1-65535)');
    refuseNodeOnly(route);
    let rec = this.orch.find(route.sandboxId);
    if (rec && isTransient(rec.state)) {
      await this.orch.settled(rec.sandboxId);
      rec = this.orch.find(route.sandboxId);
    }
    if (!rec) throw sandboxNotFound(route.sandboxId);
    authorize(rec, route, req);
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
    // A sandbox frozen for idleness runs again before the request reaches it.
    await this.orch.wake(rec.sandboxId);
    const target = this.orch.target(rec.sandboxId);
    if (!target) throw sandboxNotFound(route.sandboxId);
    return { address: target.address, host: maskedHost(rec, route.port) };
  }

  async handle(route: SandboxRoute, req: IncomingMessage, res: ServerResponse): Promise<void> {
    let to: Upstream;
    try {
      to = await this.resolve(route, req);
    } catch (err) {
      return sendError(res, err);
    }
    // Open until the answer is sent or the client leaves: a streamed command counts as activity.
    res.once('close', this.orch.activity.begin(route.sandboxId));
    const body = isReplayable(req) ? await readBody(req, this.bodyIdleMs) : undefined;
    if (body === 'gone') return;
    if (body === 'stalled') return this.stalled(res);
    let upstream: ClientRequest | undefined;
    res.once('close', () => {
      if (!res.writableFinished) upstream?.destroy();
    });
    const send = (attempt: number) => {
      upstream = request({
        host: to.address,
        port: route.port,
        method: req.method,
        path: route.path,
        headers: forwardHeaders(req, {
          keepUpgrade: false,
          ...(to.host !== undefined ? { host: to.host } : {}),
        }),
        agent: this.agent(route.sandboxId),
      });
      upstream.on('response', (up) => {
        res.writeHead(up.statusCode ?? 502, clientHeaders(up, route));
        // Server-sent events and streamed RPC output must reach the client as they are produced.
        res.flushHeaders();
        if (isConnectStream(up.headers)) return this.relayStream(route.sandboxId, up, res);
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
      if (body) return void upstream.end(body);
      req.pipe(upstream);
      // Once the sandbox answers, how long its request stays open is its own affair.
      bodyDeadline(req, this.bodyIdleMs, () => {
        if (res.headersSent) return;
        upstream?.destroy();
        this.stalled(res);
      });
    };
    send(0);
  }

  /** Relays a Connect stream, and keeps its cut for a drain until the client's answer closes. */
  private relayStream(id: string, up: IncomingMessage, res: ServerResponse): void {
    const cut = relayConnectStream(up, res, cutError(id, 'lost'));
    const open = this.streams.get(id) ?? new Set();
    this.streams.set(id, open.add(cut));
    res.once('close', () => open.delete(cut));
  }

  /** The answer to a client that stopped sending its body: 408, and the connection closed. */
  private stalled(res: ServerResponse): void {
    const secs = Math.round(this.bodyIdleMs / 1000);
    sendAnswer(res, statusBody(408, `the request body stalled: no data for ${secs} s`), true);
  }

  async upgrade(route: SandboxRoute, req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    let to: Upstream;
    try {
      to = await this.resolve(route, req);
    } catch (err) {
      socket.end(errorResponseText(err));
      return;
    }
    socket.once('close', this.orch.activity.begin(route.sandboxId));
    const upstream = request({
      host: to.address,
      port: route.port,
      method: req.method,
      path: route.path,
      headers: forwardHeaders(req, {
        keepUpgrade: true,
        ...(to.host !== undefined ? { host: to.host } : {}),
      }),
    });
    // A client gone before the sandbox answered leaves nothing open in the sandbox for it.
    const held = holdUntilUpgraded(socket, () => upstream.destroy());
    upstream.on('upgrade', (up, upSocket, upHead) => {
      const set = this.upgraded.get(route.sandboxId) ?? new Set<Socket>();
      this.upgraded.set(route.sandboxId, set.add(upSocket));
      upSocket.on('close', () => set.delete(upSocket));
      spliceUpgrade(socket, Buffer.concat([head, held.take()]), up, upSocket, upHead);
    });
    // Refused: the status alone, since the sandbox's headers and body would reach the client
    // without the proxy's CSP.
    upstream.on('response', (up) => {
      held.take();
      socket.resume();
      socket.end(rawAnswerHead(up, { first: ['connection: close', 'content-length: 0'], keep: () => false }));
      up.resume();
    });
    upstream.on('error', () => socket.destroy());
    upstream.end();
  }

  close(): void {
    for (const id of [...this.agents.keys(), ...this.upgraded.keys()]) void this.drain(id, 'stop');
  }
}

/** Pauses before sending a request again whose connection was reset before any answer. */
const RESEND_DELAYS_MS = [100, 300, 800, 1500];
