import { Counter, Gauge, type Registry } from 'prom-client';
import type { ChunkFetchObserver } from '@agentenv/snapshot';
import type { PeerFault, PeerObserver } from './peer-source.js';
import type { ServeObserver } from './server.js';

/**
 * Where materialised chunks came from (this node's cache, peers, the repository), what went
 * wrong with peers, and what this node served them; on the node's registry (GET /metrics).
 */
export class ChunkMetrics implements ChunkFetchObserver, PeerObserver, ServeObserver {
  private readonly bytes: Counter<'source'>;
  private readonly chunks: Counter<'source'>;
  private readonly rejections: Counter<'source'>;
  private readonly peerErrors: Counter<'kind'>;
  private readonly servedBytes: Counter;
  private readonly servedChunks: Counter;
  private readonly refusals: Counter<'reason'>;
  private fromPeers = 0;
  private fromRepository = 0;

  constructor(registry: Registry) {
    const registers = [registry];
    this.bytes = new Counter({
      name: 'aenv_chunk_fetch_bytes_total',
      help: 'Bytes of capture chunks materialised, by source (cache, peers, repository)',
      labelNames: ['source'],
      registers,
    });
    this.chunks = new Counter({
      name: 'aenv_chunk_fetch_chunks_total',
      help: 'Capture chunks materialised, by source (cache, peers, repository)',
      labelNames: ['source'],
      registers,
    });
    this.rejections = new Counter({
      name: 'aenv_chunk_fetch_rejected_total',
      help: 'Chunks whose bytes did not match their hash, by source',
      labelNames: ['source'],
      registers,
    });
    this.peerErrors = new Counter({
      name: 'aenv_p2p_peer_errors_total',
      help: 'Failed requests to peers, by kind (connect, timeout, stream, closed, protocol, refused, corrupt)',
      labelNames: ['kind'],
      registers,
    });
    this.servedBytes = new Counter({
      name: 'aenv_p2p_served_bytes_total',
      help: 'Chunk bytes this node served to peers',
      registers,
    });
    this.servedChunks = new Counter({
      name: 'aenv_p2p_served_chunks_total',
      help: 'Chunks this node served to peers',
      registers,
    });
    this.refusals = new Counter({
      name: 'aenv_p2p_refused_requests_total',
      help: 'Peer requests refused, by reason (unauthorized, bad_request, busy)',
      labelNames: ['reason'],
      registers,
    });
    const ratio = () => {
      const n = this.fromPeers + this.fromRepository;
      return n ? this.fromPeers / n : 0;
    };
    new Gauge({
      name: 'aenv_p2p_peer_hit_ratio',
      help: 'Share of the chunks that a materialisation needed from outside this node that came from peers',
      registers,
      collect() {
        this.set(ratio());
      },
    });
  }

  fetched(source: string, bytes: number): void {
    this.bytes.inc({ source }, bytes);
    this.chunks.inc({ source });
    if (source === 'peers') this.fromPeers++;
    if (source === 'repository') this.fromRepository++;
  }

  rejected(source: string): void {
    this.rejections.inc({ source });
  }

  peerFailed(kind: PeerFault): void {
    this.peerErrors.inc({ kind });
  }

  served(bytes: number): void {
    this.servedBytes.inc(bytes);
    this.servedChunks.inc();
  }

  refused(reason: 'unauthorized' | 'bad_request' | 'busy'): void {
    this.refusals.inc({ reason });
  }
}
