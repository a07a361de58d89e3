import { describe, expect, it } from 'vitest';
import { mergeCatalogs, mergePages, mergeSummaries } from '../../src/server/merge.js';
import type { DashboardSandbox } from '../../src/shared/types.js';

const row = (id: string, startedAt: string, nodeID: string): DashboardSandbox => ({
  sandboxID: id,
  templateID: 'base',
  nodeID,
  state: 'running',
  startedAt,
  endAt: startedAt,
  cpuCount: 1,
  memoryMB: 512,
  diskSizeMB: 1024,
  metadata: {},
});

describe('merging what the nodes answer', () => {
  it('adds counts up and keeps every sample in time order', () => {
    const s = mergeSummaries(
      [
        {
          nodeIDs: ['a'],
          now: 1,
          windowMs: 900,
          counts: { running: 2, paused: 1 },
          samples: [{ stage: 'create', at: 5, ms: 1, ok: true }],
        },
        {
          nodeIDs: ['b'],
          now: 1,
          windowMs: 900,
          counts: { running: 3 },
          samples: [{ stage: 'fork', at: 2, ms: 1, ok: true }],
        },
      ],
      9,
    );
    expect(s).toMatchObject({
      nodeIDs: ['a', 'b'],
      now: 9,
      windowMs: 900,
      counts: { running: 5, paused: 1 },
    });
    expect(s.samples.map((x) => x.at)).toEqual([2, 5]);
  });

  it('merges pages newest first across nodes and counts the total once', () => {
    const a = {
      items: [row('a3', '2026-01-03', 'a'), row('a1', '2026-01-01', 'a')],
      total: 2,
      offset: 0,
      limit: 3,
    };
    const b = {
      items: [row('b4', '2026-01-04', 'b'), row('b2', '2026-01-02', 'b')],
      total: 7,
      offset: 0,
      limit: 3,
    };
    const p = mergePages([a, b], 1, 2);
    expect(p.items.map((s) => s.sandboxID)).toEqual(['a3', 'b2']);
    expect(p.total).toBe(9);
  });

  it('lists each capture of the shared repository once and every node cache', () => {
    const e = { id: 'x', kind: 'snapshot' as const, names: [], bytesTotal: 1, createdAt: '' };
    const c = mergeCatalogs([
      { entries: [e], caches: [{ nodeID: 'a', usedBytes: 1, capacityBytes: 2, entries: 1 }] },
      { entries: [e], caches: [{ nodeID: 'b', usedBytes: 1, capacityBytes: 2, entries: 1 }] },
    ]);
    expect(c.entries).toHaveLength(1);
    expect(c.caches.map((x) => x.nodeID)).toEqual(['a', 'b']);
  });
});
