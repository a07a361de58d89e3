import { createHash } from 'node:crypto';
import type { ChunkRef, ChunkSession, ChunkSource } from '@agentenv/snapshot';
import { EMPTY_SESSION } from '@agentenv/snapshot';
import { PeerClient, PeerError, type PeerClientOptions, type PeerErrorKind } from './client.js';
import type { PeerDirectory } from './directory.js';
import type { PeerAddress } from './transport.js';

export type PeerFault = PeerErrorKind | 'corrupt';

export interface PeerObserver {
  peerFailed(kind: PeerFault): void;
}

export interface PeerChunkSourceOptions extends PeerClientOptions {
  readonly directory: PeerDirectory;
  /** How long a peer that failed or sent wrong bytes is left out. */
  readonly penaltyMs: number;
  /** Peers asked per materialisation (default 8), the directory's likeliest first. */
  readonly maxPeers?: number;
  readonly observer?: PeerObserver;
  readonly now?: () => number;
}

const MAX_PEERS = 8;

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/**
 * Chunks from other nodes. A materialisation first asks each peer the directory names which of
 * its chunks it holds; then every chunk goes to the least busy peer that has it, verified before
 * it is handed on. A peer that fails, or sends bytes that do not match
 * the hash, is left out for `penaltyMs`; a chunk no healthy peer delivers is a miss (the
 * repository serves it).
 */
export class PeerChunkSource implements ChunkSource {
  readonly name = 'peers';
  private readonly clients = new Map<string, PeerClient>();
  private readonly penalties = new Map<string, number>();
  private readonly now: () => number;

  constructor(private readonly o: PeerChunkSourceOptions) {
    this.now = o.now ?? Date.now;
  }

  async begin(chunks: readonly ChunkRef[]): Promise<ChunkSession> {
    const hashes = [...new Set(chunks.map(([h]) => h))];
    const found = await this.o.directory.peers(hashes).catch(() => []);
    const asked = found
      .filter((p) => p.id !== this.o.endpoint.id && !this.penalised(p.id))
      .slice(0, this.o.maxPeers ?? MAX_PEERS);
    if (!asked.length) return EMPTY_SESSION;
    // Every peer is asked about every chunk: a directory knows at best a sample of what each holds.
    const holders = new Map<string, PeerClient[]>();
    await Promise.all(
      asked.map(async (peer) => {
        const client = this.client(peer);
        const held = await client.have(hashes).catch((e: unknown) => this.fail(peer.id, e));
        for (const h of held ?? []) holders.set(h, [...(holders.get(h) ?? []), client]);
      }),
    );
    if (!holders.size) return EMPTY_SESSION;
    return {
      get: (hash, bytes) => this.fetch(holders.get(hash) ?? [], hash, bytes),
      rejected: () => undefined,
      end: () => undefined,
    };
  }

  private async fetch(holders: readonly PeerClient[], hash: string, bytes: number): Promise<Buffer | null> {
    const tried = new Set<string>();
    for (;;) {
      const next = holders
        .filter((c) => !tried.has(c.peer.id) && !this.penalised(c.peer.id))
        .sort((a, b) => a.load - b.load)[0];
      if (!next) return null;
      tried.add(next.peer.id);
      const data = await next.get(hash, bytes).catch((e: unknown) => this.fail(next.peer.id, e));
      if (!data) continue;
      if (data.length === bytes && sha256(data) === hash) return data;
      this.penalise(next.peer.id, 'corrupt');
    }
  }

  private client(peer: PeerAddress): PeerClient {
    let c = this.clients.get(peer.id);
    if (!c || c.peer.addresses.join() !== peer.addresses.join()) {
      c?.close();
      c = new PeerClient(peer, this.o);
      this.clients.set(peer.id, c);
    }
    return c;
  }

  private fail(peerId: string, e: unknown): null {
    this.penalise(peerId, e instanceof PeerError ? e.kind : 'stream');
    return null;
  }

  private penalise(peerId: string, kind: PeerFault): void {
    this.o.observer?.peerFailed(kind);
    this.penalties.set(peerId, this.now() + this.o.penaltyMs);
  }

  private penalised(peerId: string): boolean {
    const until = this.penalties.get(peerId);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.penalties.delete(peerId);
    return false;
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}
