import { describe, expect, it } from 'vitest';
import { heartbeatRequest } from '../../src/cluster/report.js';
import { loadConfig } from '../../src/config/load.js';

const ID = 'ab'.repeat(32);

describe('p2p in the cluster heartbeat', () => {
  it('the heartbeat carries the endpoint and the sample when p2p is on, neither when off', () => {
    const base = {
      identity: { nodeId: 'n', clusterId: 'c', advertiseUrl: 'http://x', version: '1', bootId: 'b' },
      draining: false,
      records: [],
      host: { cpuCount: 1, memoryTotalMib: 1, memoryAvailableMib: 1, loadAvg1m: 0 },
      limits: { maxSandboxes: 1, maxConcurrentStarts: 1 },
      cacheKeys: [],
    };
    const on = heartbeatRequest({
      ...base,
      p2p: { endpointId: ID, addresses: ['127.0.0.1:1'], chunkKeys: ['h1', 'h2'] },
    });
    expect(on.p2p).toEqual({ endpointId: ID, addresses: ['127.0.0.1:1'] });
    expect(on.chunkKeys).toEqual(['h1', 'h2']);
    const off = heartbeatRequest(base);
    expect(off.p2p).toBeUndefined();
    expect(off.chunkKeys).toBeUndefined();
  });
});

describe('[p2p] config', () => {
  it('is off by default and can be turned on', () => {
    const c = loadConfig({});
    expect(c.p2p).toMatchObject({ enabled: false, peers: [], bindAddrs: ['0.0.0.0:9092'] });
    expect(loadConfig({ AENV_P2P_ENABLED: 'true' }).p2p.enabled).toBe(true);
  });
});
