import type { Logger } from 'pino';
import { IrohEndpoint } from './iroh.js';
import type { IncomingLink, PeerAddress, PeerLink, PeerTransport } from './transport.js';

const MAX_BACKOFF_MS = 30_000;

export interface EndpointKeeperOptions {
  readonly secretKey: Buffer;
  readonly bindAddrs: readonly string[];
  readonly onLink: (link: IncomingLink) => void;
  readonly handshakeMs: number;
  readonly logger: Logger;
}

/**
 * This node's endpoint, kept open: if it stops accepting without being closed here, it is bound
 * again. iroh rebinds its sockets when the host's network changes (the node adds and removes
 * sandbox interfaces), and a rebind to the same port fails with EADDRINUSE and leaves the
 * endpoint with closed sockets (seen in its warnings). It is then bound again with the same key
 * and addresses, so peers reach the same id, after a growing pause between attempts. Dialling
 * goes through whichever endpoint is current.
 */
export class EndpointKeeper implements PeerTransport {
  private closing = false;
  private backoffMs = 1000;

  private constructor(
    private current: IrohEndpoint,
    private readonly opts: EndpointKeeperOptions,
  ) {
    this.serve();
  }

  static async open(opts: EndpointKeeperOptions): Promise<EndpointKeeper> {
    const ep = await IrohEndpoint.bind(opts);
    return new EndpointKeeper(ep, opts);
  }

  get id(): string {
    return this.current.id;
  }

  addresses(): string[] {
    return this.current.addresses();
  }

  connect(peer: PeerAddress, timeoutMs: number): Promise<PeerLink> {
    return this.current.connect(peer, timeoutMs);
  }

  private serve(): void {
    const ep = this.current;
    void ep.acceptLoop(this.opts.onLink, this.opts.handshakeMs).finally(() => {
      if (!this.closing) void this.reopen(ep);
    });
  }

  private async reopen(dead: IrohEndpoint): Promise<void> {
    this.opts.logger.warn(
      { endpointId: dead.id, closed: dead.isClosed() },
      'p2p endpoint stopped accepting: binding it again',
    );
    await dead.close().catch(() => undefined);
    while (!this.closing) {
      try {
        this.current = await IrohEndpoint.bind(this.opts);
        this.backoffMs = 1000;
        this.serve();
        return;
      } catch (err) {
        this.opts.logger.warn({ err, retryInMs: this.backoffMs }, 'binding the p2p endpoint again failed');
        await new Promise((r) => setTimeout(r, this.backoffMs));
        this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
      }
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.current.close();
  }
}
