import type { PeerAddress } from './transport.js';

/**
 * Who may hold which chunks. An answer is a hint — the peer source asks each candidate what it
 * really has — so a directory may be stale or, like the static one, know nothing per chunk.
 */
export interface PeerDirectory {
  /** Candidate peers for each of `hashes` (a hash without candidates may be left out). */
  candidates(hashes: readonly string[]): Promise<ReadonlyMap<string, readonly PeerAddress[]>>;
}

/** The peers listed in `[p2p] peers`: every one is a candidate for every chunk. */
export class StaticPeerDirectory implements PeerDirectory {
  constructor(private readonly peers: readonly PeerAddress[]) {}

  candidates(hashes: readonly string[]): Promise<ReadonlyMap<string, readonly PeerAddress[]>> {
    const all = this.peers;
    return Promise.resolve(new Map(all.length ? hashes.map((h) => [h, all] as const) : []));
  }
}

const ENDPOINT_ID = /^[0-9a-f]{64}$/;
const SOCKET = /^(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):\d{1,5}$/;

/** `<endpoint id>@<ip:port>[,<ip:port>…]`, as `[p2p] peers` lists them; throws a message naming the entry. */
export function parsePeer(entry: string): PeerAddress {
  const [id, addrs, ...rest] = entry.trim().split('@');
  const addresses = (addrs ?? '').split(',').filter(Boolean);
  if (
    !id ||
    !ENDPOINT_ID.test(id) ||
    rest.length ||
    !addresses.length ||
    !addresses.every((a) => SOCKET.test(a))
  ) {
    throw new Error(
      `p2p peer ${JSON.stringify(entry)} is not "<endpoint id: 64 hex>@<ip:port>[,<ip:port>…]"`,
    );
  }
  return { id, addresses };
}
