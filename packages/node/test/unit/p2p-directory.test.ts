import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { parsePeer, StaticPeerDirectory } from '../../src/p2p/directory.js';
import { SchedulerPeerDirectory, type ChunkPeerLookup } from '../../src/p2p/scheduler-directory.js';

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

  it('a static directory offers every peer for every chunk, and nothing without peers', async () => {
    const peer = parsePeer(`${ID}@127.0.0.1:9092`);
    const m = await new StaticPeerDirectory([peer]).candidates(['x', 'y']);
    expect([...m.entries()]).toEqual([
      ['x', [peer]],
      ['y', [peer]],
    ]);
    expect((await new StaticPeerDirectory([]).candidates(['x'])).size).toBe(0);
  });

  it('the scheduler directory asks in batches, leaves itself and endpoint-less nodes out', async () => {
    const calls: { keys: string[]; excludeNodeId: string; maxPeers: number }[] = [];
    const lookup: ChunkPeerLookup = {
      findChunkPeers: (req) => {
        calls.push(req);
        return Promise.resolve({
          results: req.keys.map((key) => ({
            key,
            peers: [
              { nodeId: 'n2', endpoint: { endpointId: ID2, addresses: ['127.0.0.1:2'] } },
              { nodeId: 'self', endpoint: { endpointId: ID, addresses: ['127.0.0.1:1'] } },
              { nodeId: 'n3' },
            ],
          })),
        });
      },
    };
    const keys = Array.from({ length: 5000 }, (_, i) => `k${i}`);
    const m = await new SchedulerPeerDirectory(lookup, 'self').candidates(keys);
    expect(calls.map((c) => c.keys.length)).toEqual([4096, 904]);
    expect(calls[0]).toMatchObject({ excludeNodeId: 'self', maxPeers: 4 });
    expect(m.size).toBe(5000);
    expect(m.get('k0')).toEqual([{ id: ID2, addresses: ['127.0.0.1:2'] }]);
  });

  it('a failed scheduler lookup leaves chunks without candidates', async () => {
    const lookup: ChunkPeerLookup = { findChunkPeers: () => Promise.reject(new Error('down')) };
    expect((await new SchedulerPeerDirectory(lookup, 'self').candidates(['a'])).size).toBe(0);
  });
});

describe('[p2p] config', () => {
  it('is off by default and can be turned on', () => {
    const c = loadConfig({});
    expect(c.p2p).toMatchObject({ enabled: false, peers: [], bindAddrs: ['0.0.0.0:9092'] });
    expect(loadConfig({ AENV_P2P_ENABLED: 'true' }).p2p.enabled).toBe(true);
  });
});
