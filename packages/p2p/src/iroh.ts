import iroh from '@number0/iroh';
import type {
  BiStream as IrohBiStream,
  Connection as IrohConnection,
  Endpoint as IrohEndpointHandle,
  EndpointAddr as IrohEndpointAddr,
} from '@number0/iroh';
import { ALPN } from './protocol.js';
import {
  TransportError,
  type IncomingLink,
  type PeerAddress,
  type PeerLink,
  type PeerTransport,
} from './transport.js';

const { Endpoint, EndpointAddr, EndpointId, RelayMode, SecretKey, presetMinimal, setLogLevel } = iroh;

let warningsShown = false;

/**
 * iroh's own warnings (socket errors, failed rebinds) go to the process's output. The binding
 * installs a global subscriber and aborts the process when asked a second time: once only.
 */
function showIrohWarnings(): void {
  if (warningsShown) return;
  warningsShown = true;
  setLogLevel('Warn' as Parameters<typeof setLogLevel>[0]);
}

const ALPN_BYTES = toArray(Buffer.from(ALPN));

/**
 * The binding moves bytes as arrays of numbers; a plain loop is several times faster than
 * Array.from on a Buffer.
 */
function toArray(buf: Buffer): number[] {
  const out = new Array<number>(buf.length);
  for (let i = 0; i < buf.length; i++) out[i] = buf[i]!;
  return out;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string, onTimeout?: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout?.();
      reject(new TransportError('timeout', `${what} timed out after ${ms} ms`));
    }, ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

class Link implements PeerLink {
  private dead = false;

  constructor(
    private readonly conn: IrohConnection,
    readonly remoteId: string,
  ) {
    void conn.closed().then(
      () => (this.dead = true),
      () => (this.dead = true),
    );
  }

  get alive(): boolean {
    return !this.dead;
  }

  /** Sends `data` on a new stream and reads the whole answer (at most `maxResponse` bytes). */
  async request(data: Buffer, maxResponse: number, timeoutMs: number): Promise<Buffer> {
    if (this.dead) throw new TransportError('closed', `connection to ${this.remoteId} is closed`);
    let bi: IrohBiStream | undefined;
    const run = async () => {
      bi = await this.conn.openBi();
      await bi.send.writeAll(toArray(data));
      await bi.send.finish();
      return Buffer.from(await bi.recv.readToEnd(maxResponse));
    };
    try {
      return await withTimeout(run(), timeoutMs, `request to peer ${this.remoteId}`, () => {
        void bi?.recv.stop(0n).catch(() => undefined);
      });
    } catch (e) {
      if (e instanceof TransportError) throw e;
      throw new TransportError('stream', `request to peer ${this.remoteId} failed: ${(e as Error).message}`, {
        cause: e,
      });
    }
  }

  close(): void {
    this.dead = true;
    try {
      this.conn.close(0n, []);
    } catch {
      // already closed
    }
  }
}

/**
 * This node's iroh endpoint: no relay, no discovery service, direct addresses only, speaking
 * only the chunk ALPN. The only module that touches the binding.
 */
export class IrohEndpoint implements PeerTransport {
  private constructor(private readonly ep: IrohEndpointHandle) {}

  static async bind(opts: { secretKey: Buffer; bindAddrs: readonly string[] }): Promise<IrohEndpoint> {
    showIrohWarnings();
    const b = Endpoint.builder();
    presetMinimal(b);
    b.relayMode(RelayMode.disabled());
    b.secretKey(toArray(opts.secretKey));
    b.alpns([ALPN_BYTES]);
    for (const a of opts.bindAddrs) b.bindAddr(a);
    return new IrohEndpoint(await b.bind());
  }

  static newSecretKey(): Buffer {
    return Buffer.from(SecretKey.generate().toBytes());
  }

  /** The endpoint id (hex) a secret key gives. */
  static idOf(secretKey: Buffer): string {
    return SecretKey.fromBytes(toArray(secretKey)).public().toString();
  }

  get id(): string {
    return this.ep.id().toString();
  }

  /** The direct addresses peers can dial. */
  addresses(): string[] {
    return this.ep.addr().directAddresses();
  }

  isClosed(): boolean {
    return this.ep.isClosed();
  }

  boundSockets(): string[] {
    return this.ep.boundSockets();
  }

  async connect(peer: PeerAddress, timeoutMs: number): Promise<PeerLink> {
    let addr: IrohEndpointAddr;
    try {
      addr = new EndpointAddr(EndpointId.fromString(peer.id), null, [...peer.addresses]);
    } catch (e) {
      throw new TransportError('connect', `bad peer address ${peer.id}: ${(e as Error).message}`);
    }
    try {
      const conn = await withTimeout(
        this.ep.connect(addr, ALPN_BYTES),
        timeoutMs,
        `connecting to ${peer.id}`,
      );
      return new Link(conn, conn.remoteId().toString());
    } catch (e) {
      if (e instanceof TransportError) throw e;
      throw new TransportError('connect', `cannot connect to peer ${peer.id}: ${(e as Error).message}`, {
        cause: e,
      });
    }
  }

  /** Hands every incoming connection that completed its handshake to `onLink`, until close. */
  async acceptLoop(onLink: (link: IncomingLink) => void, maxHandshakeMs: number): Promise<void> {
    for (;;) {
      let incoming: Awaited<ReturnType<IrohEndpointHandle['acceptNext']>>;
      try {
        incoming = await this.ep.acceptNext();
      } catch {
        // One failed accept must not end serving; a closed endpoint does.
        if (this.ep.isClosed()) return;
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      if (!incoming) return;
      void (async () => {
        const conn = await withTimeout(
          (async () => (await incoming.accept()).connect())(),
          maxHandshakeMs,
          'handshake',
        );
        if (Buffer.from(conn.alpn()).toString() !== ALPN) {
          conn.close(1n, toArray(Buffer.from('unknown protocol')));
          return;
        }
        onLink(incomingLink(conn));
      })().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    if (!this.ep.isClosed()) await this.ep.close();
  }
}

function incomingLink(conn: IrohConnection): IncomingLink {
  return {
    remoteId: conn.remoteId().toString(),
    async next() {
      const bi = await conn.acceptBi().catch(() => null);
      if (!bi) return null;
      return {
        read: async (max, timeoutMs) =>
          Buffer.from(
            await withTimeout(bi.recv.readToEnd(max), timeoutMs, 'reading a request', () => {
              void bi.recv.stop(0n).catch(() => undefined);
            }),
          ),
        respond: async (data, timeoutMs) => {
          await withTimeout(
            (async () => {
              await bi.send.writeAll(toArray(data));
              await bi.send.finish();
            })(),
            timeoutMs,
            'sending a response',
            () => void bi.send.reset(0n).catch(() => undefined),
          );
        },
        abort() {
          void bi.send.reset(0n).catch(() => undefined);
          void bi.recv.stop(0n).catch(() => undefined);
        },
      };
    },
    close(reason) {
      try {
        conn.close(1n, toArray(Buffer.from(reason)));
      } catch {
        // already closed
      }
    },
  };
}
