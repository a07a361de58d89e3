import { describe, expect, it } from 'vitest';
import { NO_RESERVATION, type NodeLoad, type Reserved } from '../../src/model.js';
import type { Candidate, PlacementRequest } from '../../src/schedule/scoring/candidate.js';
import { rejection } from '../../src/schedule/scoring/filters.js';
import { place, sample } from '../../src/schedule/scoring/place.js';
import { DEFAULT_POLICY, type PlacementPolicy } from '../../src/schedule/scoring/policy.js';
import { projectedLoad } from '../../src/schedule/scoring/score.js';
import { nodeRecord, sequence } from './helpers.js';

const policy: PlacementPolicy = { ...DEFAULT_POLICY, cpuOvercommit: 2, memoryOvercommit: 1, bestOfK: 3 };
const req = (over: Partial<PlacementRequest> = {}): PlacementRequest => ({
  resources: { cpuCount: 1, memoryMib: 1024 },
  count: 1,
  cacheKeys: [],
  excludeNodeIds: [],
  ...over,
});

function cand(nodeId: string, load: Partial<NodeLoad> = {}, over: Partial<Candidate> = {}): Candidate {
  const base = nodeRecord(nodeId);
  return {
    node: { ...base, load: { ...base.load, ...load }, ...over.node },
    status: over.status ?? 'ready',
    reserved: over.reserved ?? NO_RESERVATION,
  };
}

describe('placement filters', () => {
  it('accepts an idle node', () => {
    expect(rejection(cand('a'), req(), policy)).toBeUndefined();
  });

  it('refuses a node at its sandbox maximum, counting starts and reservations', () => {
    expect(rejection(cand('a', { runningCount: 10 }), req(), policy)).toMatch(/maximum of 10/);
    expect(rejection(cand('a', { runningCount: 8, startsInFlight: 1 }), req(), policy)).toBeUndefined();
    const reserved: Reserved = { count: 1, cpu: 1, memoryMib: 1024 };
    expect(rejection(cand('a', { runningCount: 8, startsInFlight: 1 }, { reserved }), req(), policy)).toMatch(
      /maximum/,
    );
  });

  it('refuses a node with too many starts in flight', () => {
    const reserved: Reserved = { count: 2, cpu: 0, memoryMib: 0 };
    expect(rejection(cand('a', { startsInFlight: 2 }, { reserved }), req(), policy)).toMatch(
      /4 starts in flight/,
    );
    expect(rejection(cand('a', { startsInFlight: 1 }, { reserved }), req(), policy)).toBeUndefined();
  });

  it('refuses CPU or memory allocated over the overcommit ratio', () => {
    // 4 CPUs × 2 = 8 vCPUs, 16 GiB × 1.
    expect(rejection(cand('a', { allocatedCpu: 7 }), req(), policy)).toBeUndefined();
    expect(rejection(cand('a', { allocatedCpu: 8 }), req(), policy)).toMatch(/vCPUs allocated 8 of 8/);
    expect(rejection(cand('a', { allocatedMemoryMib: 15_872 }), req(), policy)).toMatch(/memory allocated/);
    const reserved: Reserved = { count: 0, cpu: 7, memoryMib: 0 };
    expect(rejection(cand('a', { allocatedCpu: 1 }, { reserved }), req(), policy)).toMatch(/vCPUs/);
  });

  it('refuses a node short of measured free memory', () => {
    expect(rejection(cand('a', { memoryFreeMib: 100 }), req(), policy)).toMatch(/only 100 MiB free/);
  });

  it('counts every sandbox of a multi-sandbox request', () => {
    expect(rejection(cand('a', { runningCount: 6 }), req({ count: 4 }), policy)).toBeUndefined();
    expect(rejection(cand('a', { runningCount: 7 }), req({ count: 4 }), policy)).toMatch(/maximum/);
  });
});

describe('place', () => {
  it('is unavailable without a ready node, naming what there is', () => {
    const r = place(
      [cand('a', {}, { status: 'unhealthy' }), cand('b', {}, { status: 'draining' })],
      req(),
      policy,
    );
    expect(r).toEqual({
      ok: false,
      kind: 'unavailable',
      message: 'no healthy node (1 unhealthy, 1 draining)',
    });
    expect(place([], req(), policy)).toMatchObject({
      kind: 'unavailable',
      message: /no node has registered/,
    });
  });

  it('is capacity when ready nodes exist but none has room, with the reasons', () => {
    const r = place([cand('a', { runningCount: 10 }), cand('b', { memoryFreeMib: 1 })], req(), policy);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.kind).toBe('capacity');
    expect(r.message).toContain('a: at its maximum of 10 sandboxes');
    expect(r.message).toContain('b: only 1 MiB free');
  });

  it('never places on an excluded node, and an excluded last node means capacity', () => {
    const nodes = [cand('a'), cand('b', { runningCount: 5 })];
    expect(place(nodes, req({ excludeNodeIds: ['a'] }), policy)).toMatchObject({ ok: true, nodeId: 'b' });
    expect(place([cand('a')], req({ excludeNodeIds: ['a'] }), policy)).toMatchObject({ kind: 'capacity' });
  });

  it('takes the preferred node when it fits, whatever the scores', () => {
    const nodes = [cand('a'), cand('b', { runningCount: 7 })];
    expect(place(nodes, req({ preferNodeId: 'b' }), policy)).toMatchObject({ nodeId: 'b' });
    const full = [cand('a'), cand('b', { runningCount: 10 })];
    expect(place(full, req({ preferNodeId: 'b' }), policy)).toMatchObject({ nodeId: 'a' });
  });

  it('picks the least projected load among the sampled nodes', () => {
    const nodes = [
      cand('a', { runningCount: 6 }),
      cand('b', { runningCount: 2 }),
      cand('c', { runningCount: 4 }),
    ];
    expect(place(nodes, req(), policy)).toMatchObject({ nodeId: 'b' });
  });

  it('samples only K nodes: with K=1 the sampled node wins even if another is emptier', () => {
    const nodes = [cand('a', { runningCount: 6 }), cand('b', { runningCount: 0 })];
    const k1 = { ...policy, bestOfK: 1 };
    // random() = 0 keeps the first node first in the partial shuffle.
    expect(place(nodes, req(), k1, sequence([0]))).toMatchObject({ nodeId: 'a' });
    expect(place(nodes, req(), k1, sequence([0.99]))).toMatchObject({ nodeId: 'b' });
  });

  it('projected load counts reservations and measured usage', () => {
    const idle = cand('a');
    const reserved = cand('a', {}, { reserved: { count: 5, cpu: 5, memoryMib: 5120 } });
    const busy = cand('a', { memoryUsedMib: 16_000, cpuLoad1m: 8 });
    expect(projectedLoad(reserved, req(), policy)).toBeGreaterThan(projectedLoad(idle, req(), policy));
    expect(projectedLoad(busy, req(), policy)).toBeCloseTo(
      projectedLoad(idle, req(), policy) + policy.measuredWeight * (1 - 1024 / 16384),
      5,
    );
  });
});

describe('locality', () => {
  const withCapture = (id: string, load: Partial<NodeLoad> = {}) => {
    const c = cand(id, load);
    return { ...c, node: { ...c.node, cacheKeys: ['snap-1'] } };
  };

  it('a node holding the capture wins while it has room, even when busier', () => {
    const nodes = [cand('a'), withCapture('b', { runningCount: 8 }), cand('c')];
    expect(place(nodes, req({ cacheKeys: ['snap-1'] }), policy)).toEqual({
      ok: true,
      nodeId: 'b',
      localityHit: true,
    });
  });

  it('goes elsewhere once the capture holder is full', () => {
    const nodes = [cand('a'), withCapture('b', { runningCount: 10 })];
    expect(place(nodes, req({ cacheKeys: ['snap-1'] }), policy)).toEqual({
      ok: true,
      nodeId: 'a',
      localityHit: false,
    });
  });

  it('is always in the best-of-K sample', () => {
    const fits = [cand('a'), cand('b'), cand('c'), withCapture('d')];
    const s = sample(fits, req({ cacheKeys: ['snap-1'] }), 1, sequence([0]));
    expect(s.map((c) => c.node.nodeId)).toEqual(['d', 'a']);
  });

  it('a small bonus lets load outweigh locality', () => {
    const soft = { ...policy, localityBonus: 0.05 };
    const nodes = [cand('a'), withCapture('b', { runningCount: 8 })];
    expect(place(nodes, req({ cacheKeys: ['snap-1'] }), soft)).toMatchObject({
      nodeId: 'a',
      localityHit: false,
    });
  });
});
