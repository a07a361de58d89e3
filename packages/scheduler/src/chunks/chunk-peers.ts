import { ChunkIndex } from './chunk-index.js';
import { invalid } from '@agentenv/common';
import type { Membership } from '../membership/membership.js';
import type { P2pEndpoint } from '../model.js';
import type { SchedulerStore } from '../store/store.js';

export interface KeyPeers {
  key: string;
  peers: { nodeId: string; endpoint: P2pEndpoint }[];
}

const MAX_KEYS = 1024;
const DEFAULT_PEERS = 4;

/**
 * Answers "which live nodes can serve these chunks" from the chunk keys nodes advertise. The
 * index is brought up to date from the store for each node whose advertised digest changed, so
 * every replica answers alike whichever one received the heartbeat.
 */
export class ChunkPeers {
  constructor(
    private readonly store: SchedulerStore,
    private readonly membership: Membership,
    private readonly index = new ChunkIndex(),
  ) {}

  async find(keys: readonly string[], excludeNodeId: string, maxPeers: number): Promise<KeyPeers[]> {
    if (keys.length > MAX_KEYS) throw invalid(`invalid keys: at most ${MAX_KEYS} per call`);
    const live = new Map<string, P2pEndpoint>();
    for (const v of await this.membership.views()) {
      const { node } = v;
      if (v.status === 'unhealthy' || v.status === 'connecting') {
        this.index.forget(node.nodeId);
        continue;
      }
      if (!node.p2p) continue;
      live.set(node.nodeId, node.p2p);
      if (this.index.digest(node.nodeId) !== node.chunkDigest)
        this.index.replace(node.nodeId, node.chunkDigest, await this.store.getChunkKeys(node.nodeId));
    }
    const limit = maxPeers || DEFAULT_PEERS;
    return keys.map((key) => ({
      key,
      peers: this.index
        .peers(key)
        .filter((id) => id !== excludeNodeId && live.has(id))
        .slice(0, limit)
        .map((nodeId) => ({ nodeId, endpoint: live.get(nodeId)! })),
    }));
  }
}
