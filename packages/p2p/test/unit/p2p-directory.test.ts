import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { CombinedPeerDirectory, parsePeer, StaticPeerDirectory } from '../../src/directory.js';
import { chunkSample, sortedDistinct } from '../../src/sample.js';
import { LOOKUP_KEYS, SchedulerPeerDirectory, type ChunkPeerLookup } from '../../src/scheduler-directory.js';

const ID = 'ab'.repeat(32);
const ID2 = 'cd'.repeat(32);

describe('p2p peer directories', () => {
  it('parses static peers and names a bad entry', () => {
    expect(parsePeer(`${ID}@127.0.0.1:9092`)).toEqual({ id: ID, addresses: ['127.0.0.1:9092'] });
    expect(parsePeer(`${ID}@10.0.0.1:1,[::1]:2`).addresses).toEqual(['10.0.0.1:1', '[::1]:2']);
    for (const bad of [
      '',
      ID,
      `${ID}@`,
      `xyz@127.0.0.1:1`,
      `${ID}@host:1`,
      `${ID}@1.2.3.4`,
      `${ID}@1.2.3.4:1@x`,
    ])
      expect(() => parsePeer(bad)).toThrow(/p2p peer/);
  });

  it('a static directory offers every listed peer, and combining directories keeps each endpoint once', async () => {
    const peer = parsePeer(`${ID}@127.0.0.1:9092`);
    const other = parsePeer(`${ID2}@127.0.0.1:9093`);
    expect(await new StaticPeerDirectory([peer]).peers()).toEqual([peer]);
    expect(await new StaticPeerDirectory([]).peers()).toEqual([]);
    const failing = { peers: () => Promise.reject(new Error('down')) };
    const combined = new CombinedPeerDirectory([
      new StaticPeerDirectory([peer]),
      failing,
      new StaticPeerDirectory([other, peer]),
    ]);
    expect(await combined.peers(['x'])).toEqual([peer, other]);
  });

  it('the scheduler directory looks up the smallest hashes once, ranks peers, leaves itself and endpoint-less nodes out', async () => {
    const calls: { keys: string[]; excludeNodeId: string; maxPeers: number }[] = [];
    const ID3 = 'ef'.repeat(32);
    const lookup: ChunkPeerLookup = {
      findChunkPeers: (req) => {
        calls.push(req);
        return Promise.resolve({
          results: req.keys.map((key, i) => ({
            key,
            peers: [
              ...(i % 2 ? [{ nodeId: 'n4', endpoint: { endpointId: ID3, addresses: ['127.0.0.1:3'] } }] : []),
              { nodeId: 'n2', endpoint: { endpointId: ID2, addresses: ['127.0.0.1:2'] } },
              { nodeId: 'self', endpoint: { endpointId: ID, addresses: ['127.0.0.1:1'] } },
              { nodeId: 'n3' },
            ],
          })),
        });
      },
    };
    const keys = Array.from({ length: 5000 }, (_, i) => `k${String(4999 - i).padStart(4, '0')}`);
    const peers = await new SchedulerPeerDirectory(lookup, 'self').peers([...keys, ...keys]);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.keys).toEqual([...keys].sort().slice(0, LOOKUP_KEYS));
    expect(calls[0]).toMatchObject({ excludeNodeId: 'self', maxPeers: 8 });
    expect(peers).toEqual([
      { id: ID2, addresses: ['127.0.0.1:2'] },
      { id: ID3, addresses: ['127.0.0.1:3'] },
    ]);
  });

  it('a failed scheduler lookup gives no peers', async () => {
    const lookup: ChunkPeerLookup = { findChunkPeers: () => Promise.reject(new Error('down')) };
    expect(await new SchedulerPeerDirectory(lookup, 'self').peers(['a'])).toEqual([]);
  });
});

describe('chunk samples', () => {
  it("takes each capture's smallest hashes in turn, each once, up to the limit", () => {
    expect(chunkSample([['a', 'c', 'e'], ['b', 'c'], []], 3)).toEqual(['a', 'b', 'c']);
    expect(chunkSample([['a', 'c', 'e'], ['b', 'c'], []], 4)).toEqual(['a', 'b', 'c', 'e']);
    expect(
      chunkSample(
        [
          ['a', 'c', 'e'],
          ['b', 'd'],
        ],
        4,
      ),
    ).toEqual(['a', 'b', 'c', 'd']);
    expect(
      chunkSample(
        [
          ['a', 'c', 'e'],
          ['b', 'd'],
        ],
        10,
      ),
    ).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(chunkSample([], 3)).toEqual([]);
    expect(sortedDistinct(['c', 'a', 'c'])).toEqual(['a', 'c']);
  });

  it("a node's advertised sample and another's lookup of an overlapping capture meet", () => {
    const hashes = Array.from({ length: 20_000 }, (_, i) =>
      createHash('sha256').update(`${i}`).digest('hex'),
    );
    // A caches two captures; B needs a third that shares half of the first one's chunks.
    const a1 = hashes.slice(0, 10_000);
    const a2 = hashes.slice(10_000, 15_000);
    const needed = [...hashes.slice(5_000, 10_000), ...hashes.slice(15_000)];
    const advertised = new Set(chunkSample([sortedDistinct(a1), sortedDistinct(a2)], 4096));
    const looked = chunkSample([sortedDistinct(needed)], LOOKUP_KEYS);
    expect(looked.filter((h) => advertised.has(h)).length).toBeGreaterThan(100);
  });
});
