import type { PeerDirectory } from './directory.js';
import { chunkSample, sortedDistinct } from './sample.js';
import type { PeerAddress } from './transport.js';

/**
 * The part of the scheduler's Connect client (scheduler.v1 SchedulerService) this directory uses;
 * the generated client fits it as it is.
 */
export interface ChunkPeerLookup {
  findChunkPeers(
    req: { keys: string[]; excludeNodeId: string; maxPeers: number },
    options: { timeoutMs: number },
  ): Promise<{
    results: readonly {
      key: string;
      peers: readonly { nodeId: string; endpoint?: { endpointId: string; addresses: readonly string[] } }[];
    }[];
  }>;
}

/** Keys of one FindChunkPeers call: the scheduler's limit per call. */
export const LOOKUP_KEYS = 1024;
/** A materialisation waits this long at most for the scheduler before using the repository. */
const LOOKUP_TIMEOUT_MS = 5000;

/**
 * Peers from the scheduler's chunk index. Nodes advertise a bounded sample of the chunks they
 * hold — per cached capture, its smallest hashes (`chunkSample`) — so one lookup of the smallest
 * hashes a materialisation needs finds every node holding a capture that shares chunks with it,
 * whatever the capture's size. Peers are ranked by how many of the looked-up chunks they hold.
 * A failed lookup gives no peers: the chunks come from the repository.
 */
export class SchedulerPeerDirectory implements PeerDirectory {
  constructor(
    private readonly scheduler: ChunkPeerLookup,
    private readonly selfNodeId: string,
    private readonly maxPeersPerKey = 8,
  ) {}

  async peers(hashes: readonly string[]): Promise<readonly PeerAddress[]> {
    const keys = chunkSample([sortedDistinct(hashes)], LOOKUP_KEYS);
    if (!keys.length) return [];
    const res = await this.scheduler
      .findChunkPeers(
        { keys, excludeNodeId: this.selfNodeId, maxPeers: this.maxPeersPerKey },
        { timeoutMs: LOOKUP_TIMEOUT_MS },
      )
      .catch(() => null);
    const found = new Map<string, { peer: PeerAddress; keys: number }>();
    for (const r of res?.results ?? []) {
      for (const p of r.peers) {
        const ep = p.endpoint;
        if (!ep?.endpointId || !ep.addresses.length || p.nodeId === this.selfNodeId) continue;
        const f = found.get(ep.endpointId) ?? {
          peer: { id: ep.endpointId, addresses: [...ep.addresses] },
          keys: 0,
        };
        f.keys++;
        found.set(ep.endpointId, f);
      }
    }
    return [...found.values()].sort((a, b) => b.keys - a.keys).map((f) => f.peer);
  }
}
