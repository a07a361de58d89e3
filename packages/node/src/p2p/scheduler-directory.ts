import type { PeerDirectory } from './directory.js';
import type { PeerAddress } from './transport.js';

/**
 * The part of the scheduler's Connect client (scheduler.v1 SchedulerService) this directory uses;
 * the generated client fits it as it is.
 */
export interface ChunkPeerLookup {
  findChunkPeers(req: { keys: string[]; excludeNodeId: string; maxPeers: number }): Promise<{
    results: readonly {
      key: string;
      peers: readonly { nodeId: string; endpoint?: { endpointId: string; addresses: readonly string[] } }[];
    }[];
  }>;
}

/** Keys per FindChunkPeers call, so one lookup stays a small message. */
const BATCH = 4096;

/**
 * Candidates from the scheduler's chunk index (built from the chunk keys nodes advertise in
 * their heartbeats). A lookup that fails leaves those chunks without candidates: they come from
 * the repository.
 */
export class SchedulerPeerDirectory implements PeerDirectory {
  constructor(
    private readonly scheduler: ChunkPeerLookup,
    private readonly selfNodeId: string,
    private readonly maxPeers = 4,
  ) {}

  async candidates(hashes: readonly string[]): Promise<ReadonlyMap<string, readonly PeerAddress[]>> {
    const out = new Map<string, PeerAddress[]>();
    for (let i = 0; i < hashes.length; i += BATCH) {
      const keys = hashes.slice(i, i + BATCH);
      const res = await this.scheduler
        .findChunkPeers({ keys, excludeNodeId: this.selfNodeId, maxPeers: this.maxPeers })
        .catch(() => null);
      for (const r of res?.results ?? []) {
        const peers = r.peers.flatMap((p) =>
          p.endpoint?.endpointId && p.endpoint.addresses.length && p.nodeId !== this.selfNodeId
            ? [{ id: p.endpoint.endpointId, addresses: [...p.endpoint.addresses] }]
            : [],
        );
        if (peers.length) out.set(r.key, peers);
      }
    }
    return out;
  }
}
