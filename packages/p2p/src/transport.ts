/**
 * What the chunk protocol needs from a transport: authenticated peer identities and one
 * request/response per stream. iroh.ts is the implementation; the client, server and peer source
 * see only these.
 */

/** A peer as a directory knows it: its endpoint id (hex) and direct `ip:port` addresses. */
export interface PeerAddress {
  readonly id: string;
  readonly addresses: readonly string[];
}

export class TransportError extends Error {
  override name = 'TransportError';
  constructor(
    readonly kind: 'connect' | 'timeout' | 'stream' | 'closed',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A connection to a peer whose endpoint id the transport has verified. */
export interface PeerLink {
  readonly remoteId: string;
  readonly alive: boolean;
  /** Sends `data` on a new stream and reads the whole answer (at most `maxResponse` bytes). */
  request(data: Buffer, maxResponse: number, timeoutMs: number): Promise<Buffer>;
  close(): void;
}

/** This node's side of the transport, for dialling peers. */
export interface PeerTransport {
  /** This node's endpoint id. */
  readonly id: string;
  connect(peer: PeerAddress, timeoutMs: number): Promise<PeerLink>;
}

/** One request/response stream as the server sees it. */
export interface IncomingRequest {
  /** The request, at most `max` bytes (a longer one is an error). */
  read(max: number, timeoutMs: number): Promise<Buffer>;
  respond(data: Buffer, timeoutMs: number): Promise<void>;
  abort(): void;
}

/** A connection from a peer whose endpoint id the transport has verified. */
export interface IncomingLink {
  readonly remoteId: string;
  /** The next stream the peer opened; null once the connection is gone. */
  next(): Promise<IncomingRequest | null>;
  close(reason: string): void;
}
