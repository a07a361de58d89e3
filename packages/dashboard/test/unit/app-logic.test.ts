import { describe, expect, it } from 'vitest';
import { normalizeNode } from '../../src/app/nodes.js';
import { parseHash, href } from '../../src/app/router.js';
import { backoffMs } from '../../src/app/stream.js';
import { buildTree } from '../../src/app/tree.js';
import type { CatalogEntry } from '../../src/shared/types.js';

describe('node bodies', () => {
  it("reads a node's own GET /nodes body", () => {
    const n = normalizeNode({
      nodeID: 'n1',
      status: 'ready',
      version: '0.1.0',
      sandboxCount: 3,
      startingSandboxCount: 1,
      pausedSandboxCount: 2,
      allocatedCPU: 6,
      allocatedMemoryMiB: 3072,
      cpuCount: 2,
      cpuLoad1m: 1.5,
      memoryTotalMiB: 24000,
      memoryUsedMiB: 4000,
    });
    expect(n).toMatchObject({
      nodeID: 'n1',
      running: 3,
      paused: 2,
      starting: 1,
      memoryFreeMiB: 20000,
      draining: false,
    });
  });

  it("reads the scheduler's view of a node, as a gateway lists it", () => {
    const n = normalizeNode({
      ref: { nodeId: 'n2', advertiseUrl: 'http://x' },
      status: 'NODE_STATUS_DRAINING',
      capacity: { cpuCount: 4, memoryTotalMib: 8192 },
      load: {
        runningCount: 5,
        pausedCount: 1,
        startsInFlight: 2,
        memoryUsedMib: 1000,
        memoryFreeMib: 7000,
        cpuLoad1m: 0.5,
        allocatedCpu: 10,
        allocatedMemoryMib: 5120,
      },
      cacheKeyCount: 7,
    });
    expect(n).toMatchObject({
      nodeID: 'n2',
      status: 'draining',
      draining: true,
      running: 5,
      paused: 1,
      starting: 2,
      cpuCount: 4,
      memoryFreeMiB: 7000,
      allocatedMemoryMiB: 5120,
      cacheEntries: 7,
    });
  });
});

describe('routes in the hash', () => {
  it('round-trips a view, an id and a query', () => {
    const r = parseHash(href('sandboxes', 'abc', { state: 'paused', q: '' }));
    expect(r.view).toBe('sandboxes');
    expect(r.id).toBe('abc');
    expect(r.query.get('state')).toBe('paused');
    expect(r.query.has('q')).toBe(false);
    expect(parseHash('')).toMatchObject({ view: '' });
  });
});

describe('reconnect backoff', () => {
  it('doubles from half a second up to 30 s, with bounded jitter', () => {
    expect(backoffMs(0, () => 0.5)).toBe(500);
    expect(backoffMs(3, () => 0.5)).toBe(4000);
    expect(backoffMs(20, () => 0.5)).toBe(30_000);
    expect(backoffMs(1, () => 0)).toBe(750);
    expect(backoffMs(1, () => 1)).toBe(1250);
  });
});

describe('snapshot chains', () => {
  const e = (id: string, createdAt: string, parent?: string): CatalogEntry => ({
    id,
    kind: 'snapshot',
    names: [],
    bytesTotal: 1,
    createdAt,
    ...(parent ? { parent } : {}),
  });

  it('hangs each capture under its parent, orphans at the root, oldest first', () => {
    const tree = buildTree([
      e('c', '3', 'b'),
      e('b', '2', 'a'),
      e('a', '1'),
      e('x', '0', 'gone'),
      e('b2', '4', 'a'),
    ]);
    expect(tree.map((n) => n.entry.id)).toEqual(['x', 'a']);
    const a = tree[1]!;
    expect(a.children.map((n) => n.entry.id)).toEqual(['b', 'b2']);
    expect(a.children[0]!.children.map((n) => n.entry.id)).toEqual(['c']);
  });

  it('does not hang on a self-parented record', () => {
    expect(buildTree([e('a', '1', 'a')]).map((n) => n.entry.id)).toEqual(['a']);
  });
});
