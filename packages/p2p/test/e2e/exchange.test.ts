/**
 * The chunk exchange between two real iroh endpoints on loopback (no relay, direct addresses):
 * what an authenticated peer gets, what an unauthenticated one does not, and how the peer source
 * treats a peer that sends wrong bytes or goes away.
 */
import iroh from '@number0/iroh';
import { createHash, randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { PeerClient, PeerError } from '../../src/client.js';
import { StaticPeerDirectory } from '../../src/directory.js';
import { IrohEndpoint } from '../../src/iroh.js';
import { PeerChunkSource, type PeerFault } from '../../src/peer-source.js';
import { ChunkServer, type ChunkHolder } from '../../src/server.js';
import type { PeerAddress } from '../../src/transport.js';

const KEY = 'e2b_' + 'ab'.repeat(20);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function holderOf(chunks: Buffer[], corrupt = false): ChunkHolder & { reads: number } {
  const byHash = new Map(chunks.map((c) => [sha(c), c]));
  const h = {
    reads: 0,
    has: (hash: string) => Promise.resolve(byHash.has(hash)),
    read: (hash: string) => {
      h.reads++;
      const c = byHash.get(hash);
      return Promise.resolve(c && corrupt ? randomBytes(c.length) : (c ?? null));
    },
  };
  return h;
}

const opened: { close(): unknown }[] = [];
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
});

async function endpoint(): Promise<IrohEndpoint> {
  const ep = await IrohEndpoint.bind({
    secretKey: IrohEndpoint.newSecretKey(),
    bindAddrs: ['127.0.0.1:0', '[::1]:0'],
  });
  opened.push(ep);
  return ep;
}

async function serving(holder: ChunkHolder, refusals: string[] = []) {
  const ep = await endpoint();
  const server = new ChunkServer({
    holder,
    apiKey: KEY,
    selfId: ep.id,
    observer: { served: () => undefined, refused: (r) => refusals.push(r) },
  });
  void ep.acceptLoop((l) => void server.serve(l), 5000);
  opened.push(server);
  return { ep, peer: { id: ep.id, addresses: ep.addresses() } };
}

/** A peer source over `peers` that records each peer's fault, closed after the test. */
async function peerSource(peers: PeerAddress[], timeoutMs = 5000) {
  const faults: PeerFault[] = [];
  const source = new PeerChunkSource({
    endpoint: await endpoint(),
    apiKey: KEY,
    perPeerLimit: 2,
    timeoutMs,
    penaltyMs: 60_000,
    directory: new StaticPeerDirectory(peers),
    observer: { peerFailed: (k) => faults.push(k) },
  });
  opened.push(source);
  return { source, faults };
}

describe('chunk exchange over iroh on loopback', () => {
  it('binds only loopback sockets and advertises only them', async () => {
    const ep = await endpoint();
    expect(ep.boundSockets().every((s) => s.startsWith('127.0.0.1:') || s.startsWith('[::1]:'))).toBe(true);
    expect(ep.addresses().length).toBeGreaterThan(0);
    expect(ep.addresses().every((s) => s.startsWith('127.0.0.1:') || s.startsWith('[::1]:'))).toBe(true);
  });

  it('speaks only the chunk protocol: a connection for another ALPN is refused', async () => {
    const { peer } = await serving(holderOf([randomBytes(100)]));
    const b = iroh.Endpoint.builder();
    iroh.presetMinimal(b);
    b.relayMode(iroh.RelayMode.disabled());
    b.bindAddr('127.0.0.1:0');
    const other = await b.bind();
    try {
      const addr = new iroh.EndpointAddr(iroh.EndpointId.fromString(peer.id), null, [...peer.addresses]);
      await expect(other.connect(addr, [...Buffer.from('something/else')])).rejects.toThrow();
    } finally {
      await other.close();
    }
  });

  it('an authenticated peer learns what is held and gets exactly those bytes', async () => {
    const chunks = [randomBytes(65536), randomBytes(1000), randomBytes(200_000)];
    const { peer } = await serving(holderOf(chunks));
    const client = new PeerClient(peer, {
      endpoint: await endpoint(),
      apiKey: KEY,
      perPeerLimit: 4,
      timeoutMs: 5000,
    });
    opened.push(client);
    const absent = sha(randomBytes(10));
    const held = await client.have([...chunks.map(sha), absent]);
    expect([...held].sort()).toEqual(chunks.map(sha).sort());
    const got = await Promise.all(chunks.map((c) => client.get(sha(c), c.length)));
    got.forEach((g, i) => expect(g?.equals(chunks[i]!)).toBe(true));
    expect(await client.get(absent, 10)).toBeNull();
  });

  it('a peer with the wrong key gets nothing and is disconnected', async () => {
    const chunks = [randomBytes(4096)];
    const holder = holderOf(chunks);
    const refusals: string[] = [];
    const { peer } = await serving(holder, refusals);
    const intruder = new PeerClient(peer, {
      endpoint: await endpoint(),
      apiKey: 'e2b_' + 'cd'.repeat(20),
      perPeerLimit: 1,
      timeoutMs: 5000,
    });
    opened.push(intruder);
    // UNAUTHORIZED, or the connection closed before that answer arrived: no bytes either way.
    await expect(intruder.get(sha(chunks[0]!), 4096)).rejects.toBeInstanceOf(PeerError);
    await expect(intruder.have([sha(chunks[0]!)])).rejects.toBeInstanceOf(PeerError);
    expect(holder.reads).toBe(0);
    expect(refusals).toContain('unauthorized');
  });

  it('a peer sending wrong bytes is left out, counted, and the chunk is a miss', async () => {
    const chunks = [randomBytes(8192), randomBytes(8192)];
    const evil = holderOf(chunks, true);
    const { peer } = await serving(evil);
    const { source, faults } = await peerSource([peer]);
    const session = await source.begin(chunks.map((c) => [sha(c), c.length] as const));
    expect(await session.get(sha(chunks[0]!), 8192)).toBeNull();
    expect(faults).toEqual(['corrupt']);
    // Left out: the second chunk is not even asked for.
    expect(await session.get(sha(chunks[1]!), 8192)).toBeNull();
    expect(evil.reads).toBe(1);
  });

  it('a good peer is used when another sends wrong bytes', async () => {
    const chunks = [randomBytes(8192)];
    const bad = await serving(holderOf(chunks, true));
    const good = await serving(holderOf(chunks));
    const { source } = await peerSource([bad.peer, good.peer]);
    const session = await source.begin([[sha(chunks[0]!), 8192]]);
    const got = await session.get(sha(chunks[0]!), 8192);
    expect(got?.equals(chunks[0]!)).toBe(true);
  });

  it('a peer that went away is a miss, not a hang', async () => {
    const chunks = [randomBytes(8192), randomBytes(8192)];
    const { ep, peer } = await serving(holderOf(chunks));
    const { source, faults } = await peerSource([peer], 2000);
    const session = await source.begin(chunks.map((c) => [sha(c), c.length] as const));
    expect((await session.get(sha(chunks[0]!), 8192))?.equals(chunks[0]!)).toBe(true);
    await ep.close();
    expect(await session.get(sha(chunks[1]!), 8192)).toBeNull();
    expect(faults.length).toBe(1);
  });
});
