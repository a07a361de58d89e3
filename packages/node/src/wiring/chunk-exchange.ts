import path from 'node:path';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { ConfigError, type NodeConfig } from '../config/index.js';
import { loadOrCreateSecret } from '../security/index.js';
import { CachedChunks, type ChunkSource, type RuntimeCache, type SnapshotStore } from '@agentenv/snapshot';
import {
  ChunkMetrics,
  ChunkServer,
  chunkSample,
  CombinedPeerDirectory,
  EndpointKeeper,
  IrohEndpoint,
  parsePeer,
  PeerChunkSource,
  SchedulerPeerDirectory,
  StaticPeerDirectory,
  type ChunkPeerLookup,
  type PeerAddress,
  type PeerDirectory,
} from '@agentenv/p2p';

/** What the node's cluster heartbeat advertises when P2P is on. */
export interface P2pAdvertisement {
  readonly endpointId: string;
  /** Current direct addresses (a port given as 0 changes when the endpoint is bound again). */
  readonly addresses: readonly string[];
  /** Up to `limit` chunk hashes this node can serve: a sample of every capture it caches. */
  chunkKeys(limit: number): Promise<string[]>;
}

export interface ChunkExchange {
  /** Null when `[p2p] enabled = false`: then no endpoint (and no socket) exists. */
  readonly advertisement: P2pAdvertisement | null;
  close(): Promise<void>;
}

export interface ChunkExchangeOptions {
  readonly config: NodeConfig;
  readonly apiKey: string;
  readonly store: SnapshotStore;
  readonly cache: RuntimeCache;
  readonly registry: Registry;
  readonly logger: Logger;
  /** In a cluster: peers are also found in the scheduler's chunk index. */
  readonly scheduler?: { readonly lookup: ChunkPeerLookup; readonly nodeId: string };
}

/**
 * Sets the order in which this node finds capture chunks — its runtime cache, then (with P2P on)
 * peers, then the repository — and, with P2P on, opens the iroh endpoint that serves the chunks
 * of this node's cache to peers holding the cluster's key.
 */
export async function startChunkExchange(o: ChunkExchangeOptions): Promise<ChunkExchange> {
  const metrics = new ChunkMetrics(o.registry);
  const cached = new CachedChunks(o.cache, o.store);
  const p2p = o.config.p2p;
  if (!p2p.enabled) {
    o.store.setChunkSources([cached], metrics);
    return { advertisement: null, close: () => Promise.resolve() };
  }
  let peers: PeerAddress[];
  try {
    peers = p2p.peers.map(parsePeer);
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  const secret = loadOrCreateSecret(path.join(o.config.homePath, 'secrets', 'p2p-key'), () =>
    IrohEndpoint.newSecretKey().toString('hex'),
  );
  if (!/^[0-9a-f]{64}$/.test(secret)) throw new ConfigError('secrets/p2p-key is not 32 bytes of hex');
  let endpoint: EndpointKeeper;
  try {
    endpoint = await EndpointKeeper.open({
      secretKey: Buffer.from(secret, 'hex'),
      bindAddrs: p2p.bindAddrs,
      // No connection is handed over before `server` exists: that takes an await.
      onLink: (link) => void server.serve(link),
      handshakeMs: p2p.requestTimeoutMs,
      logger: o.logger,
    });
  } catch (e) {
    throw new ConfigError(
      `cannot open the p2p endpoint on ${p2p.bindAddrs.join(', ')}: ${(e as Error).message}`,
    );
  }
  const server = new ChunkServer({
    holder: cached,
    apiKey: o.apiKey,
    selfId: endpoint.id,
    timeoutMs: p2p.requestTimeoutMs,
    observer: metrics,
  });
  const source: ChunkSource & { close(): void } = new PeerChunkSource({
    endpoint,
    apiKey: o.apiKey,
    perPeerLimit: p2p.perPeerLimit,
    timeoutMs: p2p.requestTimeoutMs,
    penaltyMs: p2p.penaltySecs * 1000,
    directory: peerDirectory(peers, o.scheduler),
    observer: metrics,
  });
  o.store.setChunkSources([cached, source], metrics);
  o.logger.info(
    { endpointId: endpoint.id, addresses: endpoint.addresses(), peers: peers.length, index: !!o.scheduler },
    'p2p chunk exchange listening',
  );
  return {
    advertisement: {
      endpointId: endpoint.id,
      get addresses() {
        return endpoint.addresses();
      },
      chunkKeys: async (limit) => chunkSample(await cached.sortedHashesByCapture(), limit),
    },
    async close() {
      o.store.setChunkSources([cached], metrics);
      source.close();
      server.close();
      await endpoint.close();
    },
  };
}

/** The static `[p2p] peers`, and in a cluster the scheduler's chunk index too. */
function peerDirectory(
  peers: readonly PeerAddress[],
  scheduler: ChunkExchangeOptions['scheduler'],
): PeerDirectory {
  const index = scheduler && new SchedulerPeerDirectory(scheduler.lookup, scheduler.nodeId);
  if (!index) return new StaticPeerDirectory(peers);
  return peers.length ? new CombinedPeerDirectory([new StaticPeerDirectory(peers), index]) : index;
}
