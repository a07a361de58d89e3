import type { PeerAddress } from './transport.js';

/**
 * Who may hold chunks of a materialisation. An answer is a hint — the peer source asks each peer
 * which of the chunks it really has — so a directory may be stale, know only a sample of each
 * peer's chunks (the scheduler's index) or nothing per chunk (the static list).
 */
export interface PeerDirectory {
  /** Peers that may hold some of `hashes`, likeliest first. */
  peers(hashes: readonly string[]): Promise<readonly PeerAddress[]>;
}

/** The peers listed in `[p2p] peers`: every one may hold anything. */
export class StaticPeerDirectory implements PeerDirectory {
  constructor(private readonly listed: readonly PeerAddress[]) {}

  peers(): Promise<readonly PeerAddress[]> {
    return Promise.resolve(this.listed);
  }
}

/** The peers of several directories, in their order, each endpoint once; a failing one adds none. */
export class CombinedPeerDirectory implements PeerDirectory {
  constructor(private readonly directories: readonly PeerDirectory[]) {}

  async peers(hashes: readonly string[]): Promise<readonly PeerAddress[]> {
    const answers = await Promise.all(this.directories.map((d) => d.peers(hashes).catch(() => [])));
    const out = new Map<string, PeerAddress>();
    for (const p of answers.flat()) if (!out.has(p.id)) out.set(p.id, p);
    return [...out.values()];
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
