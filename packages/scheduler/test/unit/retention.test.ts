import { describe, expect, it } from 'vitest';
import { Membership } from '../../src/membership/membership.js';
import { Reservations } from '../../src/schedule/reservations.js';
import { nodeRetentionMs } from '../../src/settings.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { heartbeat, ManualClock, running, settings } from './helpers.js';

/** A scheduler over a store: a new one over an empty store is what a lost Redis leaves. */
function scheduler(clock: ManualClock, s = settings()) {
  const store = new MemoryStore(clock);
  const membership = new Membership(store, clock, s);
  return { store, membership, placements: new Reservations(store, clock, s, membership) };
}

const create = { kind: 'create' as const, cacheKeys: [], excludeNodeIds: [], count: 1 };

describe('scheduler state that survives losing its store', () => {
  it('keeps a node as long as a binding to it may stand, and forgets a node that is gone', () => {
    const s = settings();
    expect(nodeRetentionMs(s)).toBeGreaterThan(s.pausedRetentionMs);
    expect(nodeRetentionMs(s)).toBeGreaterThan(s.lostRetentionMs);
    expect(nodeRetentionMs(s)).toBeGreaterThan(s.bindingTtlMs);
  });

  it('a silent node expires with its drain mark and chunk keys; a heartbeat keeps it', async () => {
    const clock = new ManualClock();
    const s = settings();
    const { store, membership } = scheduler(clock, s);
    await membership.heartbeat(heartbeat('a', { chunkKeys: ['c1'] }));
    await membership.heartbeat(heartbeat('b'));
    await membership.unregister('a');
    clock.advance(nodeRetentionMs(s) - 1000);
    await membership.heartbeat(heartbeat('b'));
    expect((await store.listNodes()).map((n) => n.nodeId)).toEqual(['a', 'b']);
    clock.advance(2000);
    expect((await store.listNodes()).map((n) => n.nodeId)).toEqual(['b']);
    expect(await store.getNode('a')).toBeUndefined();
    expect(await store.drains()).toEqual(new Map());
    expect(await store.getChunkKeys('a')).toEqual([]);
  });

  it('rebuilds bindings and the drain mark from the next heartbeats; placement honours the drain', async () => {
    const clock = new ManualClock();
    const before = scheduler(clock);
    await before.membership.heartbeat(heartbeat('a', { roster: [running('s1')] }));
    await before.membership.heartbeat(heartbeat('b'));
    await before.membership.unregister('a');
    // The drained node learns it from the answer and says so from then on (the node agent does).
    await expect(before.membership.heartbeat(heartbeat('a', { roster: [running('s1')] }))).resolves.toEqual({
      status: 'draining',
      fenced: [],
    });

    const after = scheduler(clock);
    await after.membership.heartbeat(heartbeat('a', { status: 'draining', roster: [running('s1')] }));
    await after.membership.heartbeat(heartbeat('b'));
    expect(await after.store.drains()).toEqual(new Map([['a', 'boot-a']]));
    expect((await after.placements.lookup('s1')).nodeId).toBe('a');
    for (let i = 0; i < 3; i++) expect((await after.placements.schedule(create)).nodeId).toBe('b');
  });
});
