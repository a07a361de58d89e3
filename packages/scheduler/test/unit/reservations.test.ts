import { describe, expect, it } from 'vitest';
import { DomainError } from '@agentenv/common';
import { captureKey } from '@agentenv/protocol/scheduler';
import { createInput, heartbeat, running, schedulerParts, settings } from './helpers.js';

const create = createInput;

async function cluster(nodes: string[], s = settings()) {
  const outcomes: string[] = [];
  const { clock, store, membership, placements } = schedulerParts(s, {
    placement: (_kind, outcome, hit) => outcomes.push(`${outcome}${hit ? '+local' : ''}`),
  });
  for (const id of nodes) await membership.heartbeat(heartbeat(id));
  return { clock, store, membership, placements, outcomes };
}

describe('reservations', () => {
  it('a burst of placements against identical idle nodes spreads evenly', async () => {
    const { placements } = await cluster(['a', 'b', 'c'], settings({ policy: { startsPerSlot: 3 } }));
    const counts = new Map<string, number>();
    for (let i = 0; i < 24; i++) {
      const p = await placements.schedule(create());
      counts.set(p.nodeId, (counts.get(p.nodeId) ?? 0) + 1);
    }
    expect(Object.fromEntries(counts)).toEqual({ a: 8, b: 8, c: 8 });
  });

  it('reserved room runs out: the cluster answers capacity with a retry hint', async () => {
    // 2 nodes × 4 concurrent starts.
    const { placements, outcomes } = await cluster(['a', 'b']);
    for (let i = 0; i < 8; i++) await placements.schedule(create());
    const err = await placements.schedule(create()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ kind: 'capacity', retryAfter: 1 });
    expect((err as Error).message).toMatch(/starts in flight/);
    expect(outcomes.filter((o) => o === 'capacity')).toHaveLength(1);
  });

  it('expire after their timeout and give the room back', async () => {
    const s = settings({ reservationTtlMs: 5000 });
    const { placements, clock } = await cluster(['a'], s);
    for (let i = 0; i < 4; i++) await placements.schedule(create());
    await expect(placements.schedule(create())).rejects.toMatchObject({ kind: 'capacity' });
    clock.advance(4999);
    await expect(placements.schedule(create())).rejects.toMatchObject({ kind: 'capacity' });
    clock.advance(2);
    await expect(placements.schedule(create())).resolves.toMatchObject({ nodeId: 'a' });
  });

  it('after RecordAssignment, hold the room until the node reports the sandbox', async () => {
    const { placements, membership } = await cluster(['a']);
    const held = [];
    for (let i = 0; i < 4; i++) held.push(await placements.schedule(create()));
    await placements.recordAssignment({
      reservationId: held[0]!.reservationId,
      nodeId: 'a',
      sandboxIds: ['sbx-1'],
    });
    await expect(placements.lookup('sbx-1')).resolves.toMatchObject({
      nodeId: 'a',
      nodeStatus: 'ready',
      binding: { state: 'running', source: 'assignment' },
    });
    // Its load does not count sbx-1 yet: the room stays reserved.
    await expect(placements.schedule(create())).rejects.toMatchObject({ kind: 'capacity' });
    await membership.heartbeat(heartbeat('a', { roster: [running('sbx-1')] }));
    await expect(placements.schedule(create())).resolves.toMatchObject({ nodeId: 'a' });
  });

  it('answers a retryable unavailable, not not-found, for an unknown sandbox while a store that came back is refilled', async () => {
    const s = settings();
    const { placements, store, clock } = await cluster(['a'], s);
    await expect(placements.lookup('sbx-x')).rejects.toMatchObject({ kind: 'not_found' });
    const back = clock.now();
    store.reconnectedAtMs = () => back;
    await expect(placements.lookup('sbx-x')).rejects.toMatchObject({ kind: 'unavailable', retryAfter: 1 });
    clock.advance(3 * s.heartbeatIntervalMs - 1);
    await expect(placements.lookup('sbx-x')).rejects.toThrow(/store came back .* rosters are still arriving/);
    clock.advance(1);
    await expect(placements.lookup('sbx-x')).rejects.toMatchObject({ kind: 'not_found' });
  });

  it('an assignment a roster already listed (sent during the start) ends its reservation at once', async () => {
    const { placements, membership } = await cluster(['a']);
    const held = [];
    for (let i = 0; i < 4; i++) held.push(await placements.schedule(create()));
    // A heartbeat while sbx-1 starts: the node's load counts it as a start in flight.
    const starting = heartbeat('a', { roster: [running('sbx-1', { state: 'creating' })] });
    await membership.heartbeat({ ...starting, load: { ...starting.load, startsInFlight: 1 } });
    await placements.recordAssignment({
      reservationId: held[0]!.reservationId,
      nodeId: 'a',
      sandboxIds: ['sbx-1'],
    });
    expect((await membership.view('a')).reserved.count).toBe(3);
    // The roster's binding stands: it says more than the assignment would.
    await expect(placements.lookup('sbx-1')).resolves.toMatchObject({
      binding: { state: 'creating', source: 'roster' },
    });
  });

  it('an assigned reservation the roster never confirms ends after a few intervals', async () => {
    const s = settings();
    const { placements, membership, clock } = await cluster(['a'], s);
    const held = [];
    for (let i = 0; i < 4; i++) held.push(await placements.schedule(create()));
    await placements.recordAssignment({
      reservationId: held[0]!.reservationId,
      nodeId: 'a',
      sandboxIds: ['sbx-1'],
    });
    clock.advance(3 * s.heartbeatIntervalMs + 1);
    await membership.heartbeat(heartbeat('a'));
    // The three unassigned ones are still within their own timeout.
    await expect(placements.schedule(create())).resolves.toMatchObject({ nodeId: 'a' });
  });

  it('end on ReleaseReservation; releasing twice or an unknown id is harmless', async () => {
    const { placements } = await cluster(['a']);
    const held = [];
    for (let i = 0; i < 4; i++) held.push(await placements.schedule(create()));
    await placements.release(held[1]!.reservationId);
    await placements.release(held[1]!.reservationId);
    await placements.release('rsv_unknown');
    await expect(placements.schedule(create())).resolves.toMatchObject({ nodeId: 'a' });
  });

  it('a multi-sandbox reservation holds room for all of them', async () => {
    const { placements } = await cluster(['a']);
    await placements.schedule(create({ count: 3, kind: 'fork-spill' }));
    await placements.schedule(create());
    await expect(placements.schedule(create())).rejects.toMatchObject({ kind: 'capacity' });
    await expect(placements.schedule(create({ count: 0 }))).rejects.toMatchObject({ kind: 'capacity' });
    await expect(placements.schedule(create({ count: 5000 }))).rejects.toMatchObject({ kind: 'invalid' });
  });
});

describe('resume placement and lookups', () => {
  it('a resume prefers the node the sandbox is bound to while it is ready, with its pause as locality', async () => {
    const { placements, membership } = await cluster(['a', 'b', 'c']);
    await membership.heartbeat(
      heartbeat('b', { roster: [running('sbx-p', { state: 'paused', pauseId: 'pause-1' })] }),
    );
    await expect(placements.schedule(create({ kind: 'resume', sandboxId: 'sbx-p' }))).resolves.toMatchObject({
      nodeId: 'b',
    });
  });

  it('a resume whose node is draining goes to a node holding the pause in its cache', async () => {
    const { placements, membership } = await cluster(['a', 'b', 'c']);
    await membership.heartbeat(
      heartbeat('b', { roster: [running('sbx-p', { state: 'paused', pauseId: 'pause-1' })] }),
    );
    await membership.heartbeat(heartbeat('c', { cacheKeys: [captureKey.pause('pause-1')] }));
    await membership.unregister('b');
    await expect(placements.schedule(create({ kind: 'resume', sandboxId: 'sbx-p' }))).resolves.toMatchObject({
      nodeId: 'c',
      localityHit: true,
    });
  });

  it('a create of a template goes to the node caching that template', async () => {
    const { placements, membership, outcomes } = await cluster(['a', 'b', 'c']);
    await membership.heartbeat(
      heartbeat('a', {
        cacheKeys: [captureKey.template('my-app')],
        load: { ...heartbeat('a').load, runningCount: 5 },
      }),
    );
    await expect(placements.schedule(create({ templateId: 'my-app' }))).resolves.toMatchObject({
      nodeId: 'a',
      localityHit: true,
    });
    expect(outcomes).toEqual(['placed+local']);
  });

  it('a create naming a snapshot as its template goes to the node caching that snapshot', async () => {
    const { placements, membership } = await cluster(['a', 'b', 'c']);
    await membership.heartbeat(
      heartbeat('b', {
        cacheKeys: [captureKey.snapshot('snap-1')],
        load: { ...heartbeat('b').load, runningCount: 5 },
      }),
    );
    for (let i = 0; i < 3; i++)
      await expect(placements.schedule(create({ templateId: 'snap-1' }))).resolves.toMatchObject({
        nodeId: 'b',
        localityHit: true,
      });
  });

  it('lookup of an unknown sandbox is not_found', async () => {
    const { placements } = await cluster(['a']);
    await expect(placements.lookup('nope')).rejects.toMatchObject({ kind: 'not_found' });
  });

  it('an assignment to an unknown node is refused', async () => {
    const { placements } = await cluster(['a']);
    await expect(placements.recordAssignment({ nodeId: 'zz', sandboxIds: ['x'] })).rejects.toMatchObject({
      kind: 'not_found',
    });
  });
});
