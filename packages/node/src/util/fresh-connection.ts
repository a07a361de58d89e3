import { Agent, request, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { Readable, type Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * An HTTP agent whose every request has a connection of its own, reset by this side once the
 * answer is in. gVisor cannot checkpoint a sandbox holding an established connection, and a close
 * by the server (or a `connection: close` request, which makes it close first) would leave a
 * TIME_WAIT endpoint inside the sandbox. A connection silent for `idleTimeoutMs` is dropped.
 */
export class FreshConnectionAgent extends Agent {
  // keepAlive: requests then say `connection: keep-alive`, and a finished one comes back here.
  constructor(private readonly idleTimeoutMs: number) {
    super({ keepAlive: true });
  }

  override createConnection(
    ...args: Parameters<Agent['createConnection']>
  ): ReturnType<Agent['createConnection']> {
    // An http.Agent's connections are net.Socket instances.
    const socket = super.createConnection(...args) as Socket;
    socket.setTimeout(this.idleTimeoutMs, () =>
      socket.destroy(new Error(`no answer for ${this.idleTimeoutMs} ms`)),
    );
    return socket;
  }

  override keepSocketAlive(socket: Duplex): boolean {
    (socket as Socket).resetAndDestroy();
    return false;
  }
}

export interface FreshRequest {
  readonly host: string;
  readonly port: number;
  readonly method: string;
  readonly path: string;
  readonly headers?: OutgoingHttpHeaders;
  readonly body?: Buffer | SizedBody;
  readonly timeoutMs: number;
}

/** A request body sent as it is read (never held whole), of a length known beforehand. */
export interface SizedBody {
  readonly length: number;
  readonly stream: AsyncIterable<Buffer>;
}

/** One request on a fresh connection (see FreshConnectionAgent): the status and the whole body. */
export function requestOnce(r: FreshRequest): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const body = r.body ?? Buffer.alloc(0);
    const req = request(
      {
        host: r.host,
        port: r.port,
        method: r.method,
        path: r.path,
        agent: new FreshConnectionAgent(r.timeoutMs),
        headers: { ...r.headers, 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', (e) => reject(new Error(`${r.method} ${r.path} at ${r.host}:${r.port}: ${e.message}`)));
    if (Buffer.isBuffer(body)) req.end(body);
    else pipeline(Readable.from(body.stream), req).catch((e: Error) => req.destroy(e));
  });
}
