import type { PeerAddress, PeerLink, PeerTransport } from './transport.js';
import {
  authToken,
  decodeBitmap,
  decodeChunk,
  decodeResponse,
  encodeRequest,
  MAX_HAVE,
  Op,
  Status,
  type Status as StatusCode,
} from './protocol.js';

export type PeerErrorKind = 'connect' | 'timeout' | 'stream' | 'closed' | 'protocol' | 'refused';

export class PeerError extends Error {
  override name = 'PeerError';
  constructor(
    readonly kind: PeerErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface PeerClientOptions {
  readonly endpoint: PeerTransport;
  readonly apiKey: string;
  /** Requests in flight to one peer at once. */
  readonly perPeerLimit: number;
  readonly timeoutMs: number;
}

/**
 * Requests to one peer over one connection (made on first use, made again after it dropped),
 * at most `perPeerLimit` at a time. Every failure is a PeerError; what to do about a failing
 * peer is the caller's decision.
 */
export class PeerClient {
  private link: Promise<PeerLink> | null = null;
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly token: Buffer;

  constructor(
    readonly peer: PeerAddress,
    private readonly o: PeerClientOptions,
  ) {
    this.token = authToken(o.apiKey, o.endpoint.id, peer.id);
  }

  /** Requests in flight or queued: for spreading chunks over peers. */
  get load(): number {
    return this.active + this.waiting.length;
  }

  /** Which of `hashes` the peer holds. */
  async have(hashes: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (let i = 0; i < hashes.length; i += MAX_HAVE) {
      const batch = hashes.slice(i, i + MAX_HAVE);
      const { status, payload } = await this.call(Op.HAVE, batch, Math.ceil(batch.length / 8) + 1);
      if (status !== Status.OK) throw this.refused(status);
      let bits: boolean[];
      try {
        bits = decodeBitmap(payload, batch.length);
      } catch (e) {
        throw new PeerError('protocol', `peer ${this.peer.id}: ${(e as Error).message}`);
      }
      batch.forEach((h, j) => bits[j] && out.add(h));
    }
    return out;
  }

  /** The chunk's bytes as the peer sent them (unchecked), or null when it has not got it. */
  async get(hash: string, bytes: number): Promise<Buffer | null> {
    const { status, payload } = await this.call(Op.GET, [hash], bytes + 1);
    if (status === Status.NOT_FOUND) return null;
    if (status !== Status.OK && status !== Status.OK_DEFLATE) throw this.refused(status);
    try {
      return decodeChunk(status, payload, bytes);
    } catch (e) {
      throw new PeerError('protocol', `peer ${this.peer.id}: ${(e as Error).message}`);
    }
  }

  close(): void {
    void this.link?.then((l) => l.close()).catch(() => undefined);
    this.link = null;
  }

  private refused(status: StatusCode): PeerError {
    const name = Object.entries(Status).find(([, v]) => v === status)?.[0] ?? String(status);
    return new PeerError('refused', `peer ${this.peer.id} answered ${name}`);
  }

  private async call(
    op: Op,
    hashes: readonly string[],
    maxResponse: number,
  ): Promise<{ status: StatusCode; payload: Buffer }> {
    await this.acquire();
    try {
      const link = await this.connection();
      const req = encodeRequest({ op, token: this.token, hashes });
      let data: Buffer;
      try {
        data = await link.request(req, maxResponse, this.o.timeoutMs);
      } catch (e) {
        // A timeout or a broken stream may mean a dead peer: dial again next time.
        if (this.link && (await this.link.catch(() => null)) === link) this.link = null;
        link.close();
        const kind = (e as { kind?: PeerErrorKind }).kind ?? 'stream';
        throw new PeerError(kind, (e as Error).message, { cause: e });
      }
      try {
        return decodeResponse(data);
      } catch (e) {
        throw new PeerError('protocol', `peer ${this.peer.id}: ${(e as Error).message}`);
      }
    } finally {
      this.release();
    }
  }

  private async connection(): Promise<PeerLink> {
    if (this.link) {
      const l = await this.link.catch(() => null);
      if (l?.alive) return l;
      this.link = null;
    }
    const p = this.o.endpoint.connect(this.peer, this.o.timeoutMs);
    this.link = p;
    try {
      const l = await p;
      if (l.remoteId !== this.peer.id) {
        l.close();
        throw new PeerError('connect', `peer ${this.peer.id} answered as ${l.remoteId}`);
      }
      return l;
    } catch (e) {
      if (this.link === p) this.link = null;
      if (e instanceof PeerError) throw e;
      throw new PeerError('connect', (e as Error).message, { cause: e });
    }
  }

  private async acquire(): Promise<void> {
    if (this.active < this.o.perPeerLimit) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }
}
