import { describe, expect, it } from 'vitest';
import { captureKey } from '@agentenv/protocol/scheduler';
import { confirmed, snapshotKeys, withAnnounced } from '../../src/schedule/captures.js';
import { Membership } from '../../src/membership/membership.js';
import { NO_RESERVATION, type AnnouncedCapture } from '../../src/model.js';
import type { Candidate, PlacementRequest } from '../../src/schedule/scoring/candidate.js';
import { place } from '../../src/schedule/scoring/place.js';
import { DEFAULT_POLICY } from '../../src/schedule/scoring/policy.js';
import { Reservations, type ScheduleInput } from '../../src/schedule/reservations.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { heartbeat, ManualClock, nodeRecord, running, sequence, settings } from './helpers.js';

const SNAP = 'snap1';
const announcedOn = (nodeId: string): AnnouncedCapture => ({
  nodeId,
  key: captureKey.snapshot(SNAP),
  expiresMs: Number.MAX_SAFE_INTEGER,
});

describe('a snapshot announced before its node heartbeats it', () => {
  it('is looked for under its id and each of its names', () => {
    expect(snapshotKeys(SNAP, ['mine', SNAP])).toEqual(['snapshot/snap1', 'snapshot/mine']);
  });

  it('wins placement for its node although the node reported no such key and is the busiest', () => {
    // The node that took the snapshot runs its source; the others are idle.
    const a = nodeRecord('a', { load: { ...nodeRecord('a').load, runningCount: 3, allocatedCpu: 3 } });
    const candidates = (announced: AnnouncedCapture[]): Candidate[] =>
      [a, nodeRecord('b'), nodeRecord('c')].map((node) => ({
        node: withAnnounced(node, announced),
        status: 'ready',
        reserved: NO_RESERVATION,
      }));
    const req: PlacementRequest = {
      resources: { cpuCount: 1, memoryMib: 512 },
      count: 1,
      cacheKeys: [captureKey.template(SNAP), captureKey.snapshot(SNAP)],
      excludeNodeIds: [],
    };
    const random = sequence([0]);
    expect(place(candidates([]), req, DEFAULT_POLICY, random)).toMatchObject({ localityHit: false });
    expect(place(candidates([]), req, DEFAULT_POLICY, random)).not.toMatchObject({ nodeId: 'a' });
    expect(place(candidates([announcedOn('a')]), req, DEFAULT_POLICY, random)).toEqual({
      ok: true,
      nodeId: 'a',
      localityHit: true,
    });
    // Announced for another node, it is no key of this one.
    expect(withAnnounced(a, [announcedOn('b')]).cacheKeys).toEqual([]);
  });

  it('stands until a heartbeat of its node lists the key', () => {
    const ann = [announcedOn('a'), announcedOn('b')];
    expect(confirmed('a', ['template/base'], ann)).toEqual([]);
    expect(confirmed('a', ['template/base', captureKey.snapshot(SNAP)], ann)).toEqual([ann[0]]);
  });
});

describe('snapshot locality through the scheduler', () => {
  const CAP = 5;
  const createOf = (templateId: string): ScheduleInput => ({
    kind: 'create',
    templateId,
    cacheKeys: [],
    excludeNodeIds: [],
    count: 1,
    resources: { cpuCount: 1, memoryMib: 512 },
  });

  async function setup() {
    const s = settings();
    const clock = new ManualClock();
    const store = new MemoryStore(clock);
    const membership = new Membership(store, clock, s);
    const small = { ...heartbeat('x').capacity, maxSandboxes: CAP };
    const beat = (nodeId: string, over: Parameters<typeof heartbeat>[1] = {}) =>
      membership.heartbeat(heartbeat(nodeId, { capacity: small, ...over }));
    await beat('a', { roster: [running('src')] });
    await beat('b');
    await beat('c');
    const hits: boolean[] = [];
    const placements = new Reservations(store, clock, s, membership, {
      placement: (_kind, outcome, hit) => outcome === 'placed' && hits.push(hit),
    });
    return { s, clock, store, membership, placements, beat, hits };
  }

  it('sends every create of a just-taken snapshot to its node while it has room, then spills', async () => {
    const { membership, placements, hits } = await setup();
    // The gateway reports the snapshot before its client can ask for a create from it; node a's
    // heartbeats have not listed it yet.
    await membership.announceSnapshot('a', SNAP, []);
    const nodes: string[] = [];
    for (let i = 0; i < CAP - 1; i++) {
      const p = await placements.schedule(createOf(SNAP));
      await placements.recordAssignment({
        reservationId: p.reservationId,
        nodeId: p.nodeId,
        sandboxIds: [`s${i}`],
      });
      nodes.push(p.nodeId);
    }
    expect(nodes).toEqual(['a', 'a', 'a', 'a']);
    expect(hits).toEqual([true, true, true, true]);
    // a is full (its source and four reserved starts): the snapshot starts elsewhere.
    const spilled = await placements.schedule(createOf(SNAP));
    expect(spilled.nodeId).not.toBe('a');
    expect(spilled.localityHit).toBe(false);
  });

  it('survives a heartbeat gathered before the snapshot, gives way to one that lists it, then expires', async () => {
    const { s, clock, store, membership, beat } = await setup();
    const keysOfA = async () => (await membership.view('a')).node.cacheKeys;
    await membership.announceSnapshot('a', SNAP, ['named']);
    expect(await keysOfA()).toEqual([captureKey.snapshot(SNAP), captureKey.snapshot('named')]);
    await beat('a', { roster: [running('src')], cacheKeys: ['template/base'] });
    expect(await keysOfA()).toEqual([
      'template/base',
      captureKey.snapshot(SNAP),
      captureKey.snapshot('named'),
    ]);
    // The node lists it now: its own reports decide from here, an eviction included.
    await beat('a', {
      roster: [running('src')],
      cacheKeys: [captureKey.snapshot(SNAP), captureKey.snapshot('named')],
    });
    expect(await store.listAnnouncedCaptures()).toEqual([]);
    await beat('a', { roster: [running('src')] });
    expect(await keysOfA()).toEqual([]);
    // Never confirmed, an announcement ends after the grace.
    await membership.announceSnapshot('a', 'snap2', []);
    clock.advance(3 * s.heartbeatIntervalMs - 1);
    expect(await keysOfA()).toEqual([captureKey.snapshot('snap2')]);
    clock.advance(1);
    expect(await keysOfA()).toEqual([]);
  });

  it('refuses an announcement for an unknown node or without a snapshot id', async () => {
    const { membership } = await setup();
    await expect(membership.announceSnapshot('zz', SNAP, [])).rejects.toMatchObject({ kind: 'not_found' });
    await expect(membership.announceSnapshot('a', '', [])).rejects.toMatchObject({ kind: 'invalid' });
    await expect(membership.announceSnapshot('a', SNAP, [''])).rejects.toMatchObject({ kind: 'invalid' });
    await expect(membership.announceSnapshot('a', 'x'.repeat(300), [])).rejects.toMatchObject({
      kind: 'invalid',
    });
  });
});
