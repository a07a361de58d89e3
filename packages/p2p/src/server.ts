import type { IncomingLink, IncomingRequest } from './transport.js';
import {
  authToken,
  decodeRequest,
  encodeBitmap,
  encodeChunk,
  encodeResponse,
  MAX_REQUEST_BYTES,
  Op,
  ProtocolError,
  Status,
  tokenMatches,
} from './protocol.js';

/** What the server may hand out: chunks this node holds, each checked against its hash. */
export interface ChunkHolder {
  has(hash: string): Promise<boolean>;
  read(hash: string): Promise<Buffer | null>;
}

export interface ServeObserver {
  served(bytes: number): void;
  refused(reason: 'unauthorized' | 'bad_request' | 'busy'): void;
}

export interface ChunkServerOptions {
  readonly holder: ChunkHolder;
  readonly apiKey: string;
  /** This endpoint's id (tokens are bound to it). */
  readonly selfId: string;
  /** Requests answered at once across all peers; more get BUSY. */
  readonly maxInFlight?: number;
  /** For reading a request and for sending its answer. */
  readonly timeoutMs?: number;
  readonly observer?: ServeObserver;
}

/**
 * Answers HAVE and GET from peers that prove they hold the cluster's key, with chunks from the
 * holder and nothing else. A peer that fails the proof gets UNAUTHORIZED and its connection
 * closed; a malformed request gets BAD_REQUEST. Requests are bounded in size and time.
 */
export class ChunkServer {
  private inFlight = 0;
  private readonly maxInFlight: number;
  private readonly timeoutMs: number;
  private readonly links = new Set<IncomingLink>();

  constructor(private readonly o: ChunkServerOptions) {
    this.maxInFlight = o.maxInFlight ?? 64;
    this.timeoutMs = o.timeoutMs ?? 10_000;
  }

  /** Serves one connection until it closes. */
  async serve(link: IncomingLink): Promise<void> {
    this.links.add(link);
    const expected = authToken(this.o.apiKey, link.remoteId, this.o.selfId);
    try {
      for (;;) {
        const req = await link.next();
        if (!req) return;
        void this.answer(link, req, expected).catch(() => req.abort());
      }
    } finally {
      this.links.delete(link);
    }
  }

  private async answer(link: IncomingLink, req: IncomingRequest, expected: Buffer): Promise<void> {
    if (this.inFlight >= this.maxInFlight) {
      this.o.observer?.refused('busy');
      await req.respond(encodeResponse(Status.BUSY), this.timeoutMs);
      return;
    }
    this.inFlight++;
    try {
      let parsed;
      try {
        parsed = decodeRequest(await req.read(MAX_REQUEST_BYTES, this.timeoutMs));
      } catch (e) {
        if (!(e instanceof ProtocolError)) throw e;
        this.o.observer?.refused('bad_request');
        await req.respond(encodeResponse(Status.BAD_REQUEST), this.timeoutMs);
        return;
      }
      if (!tokenMatches(expected, parsed.token)) {
        this.o.observer?.refused('unauthorized');
        await req.respond(encodeResponse(Status.UNAUTHORIZED), this.timeoutMs).catch(() => undefined);
        link.close('unauthorized');
        return;
      }
      if (parsed.op === Op.HAVE) {
        const bits = await Promise.all(parsed.hashes.map((h) => this.o.holder.has(h)));
        await req.respond(encodeResponse(Status.OK, encodeBitmap(bits)), this.timeoutMs);
        return;
      }
      const data = await this.o.holder.read(parsed.hashes[0]!);
      if (!data) {
        await req.respond(encodeResponse(Status.NOT_FOUND), this.timeoutMs);
        return;
      }
      await req.respond(encodeChunk(data), this.timeoutMs);
      this.o.observer?.served(data.length);
    } finally {
      this.inFlight--;
    }
  }

  close(): void {
    for (const l of this.links) l.close('shutting down');
    this.links.clear();
  }
}
