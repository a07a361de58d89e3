import { describe, expect, it } from 'vitest';
import { heartbeat, running, schedulerParts, settings } from './helpers.js';

const s = settings({ nodeGoneAfterMs: 60_000 });

const setup = () => schedulerParts(s);

/** Node `a` runs `s1`; the gateway forwarded its pause, which `a` had not stored yet. */
async function pausedOnA() {
  const t = setup();
  await t.membership.heartbeat(heartbeat('a', { roster: [running('s1', { pauseId: 'old' })] }));
  await t.placements.recordPause({ nodeId: 'a', sandboxId: 's1', stored: false });
  return t;
}

/** Silence of node `a` for `ms`, node `b` heartbeating throughout. */
async function silence(t: ReturnType<typeof setup>, ms: number) {
  for (let gone = 0; gone < ms; gone += 1000) {
    t.clock.advance(1000);
    await t.membership.heartbeat(heartbeat('b'));
  }
}

describe('a pause not yet stored in the shared repository', () => {
  it('is paused on its node as soon as the gateway records it, with the older pause beside it', async () => {
    const { placements } = await pausedOnA();
    await expect(placements.lookup('s1')).resolves.toMatchObject({
      binding: { state: 'paused', pauseLocalOnly: true, pauseId: 'old', nodeId: 'a', templateId: 'base' },
    });
  });

  it('is not undone by a roster that may predate it, but is by a later one', async () => {
    const { membership, placements, clock } = await pausedOnA();
    await membership.heartbeat(heartbeat('a', { roster: [running('s1', { state: 'pausing' })] }));
    await expect(placements.lookup('s1')).resolves.toMatchObject({ binding: { state: 'paused' } });
    clock.advance(2 * s.heartbeatIntervalMs);
    await membership.heartbeat(heartbeat('a', { roster: [running('s1')] }));
    await expect(placements.lookup('s1')).resolves.toMatchObject({ binding: { state: 'running' } });
  });

  it('takes the stored state of that pause from a roster that lands after the record', async () => {
    const { membership, placements, clock } = await pausedOnA();
    // A roster built before the pause still shows the older one: the record stands.
    await membership.heartbeat(
      heartbeat('a', { roster: [running('s1', { state: 'paused', pauseId: 'old' })] }),
    );
    await expect(placements.lookup('s1')).resolves.toMatchObject({ binding: { pauseLocalOnly: true } });
    // The new pause, stored already when the node reported it.
    clock.advance(500);
    await membership.heartbeat(
      heartbeat('a', { roster: [running('s1', { state: 'paused', pauseId: 'new' })] }),
    );
    const { binding } = await placements.lookup('s1');
    expect(binding).toMatchObject({ state: 'paused', pauseId: 'new' });
    expect(binding.pauseLocalOnly).toBeUndefined();
  });

  it('stays paused on a silent node, and is lost once the node is gone for good', async () => {
    const t = await pausedOnA();
    await silence(t, 3 * s.heartbeatIntervalMs + 1000);
    expect(await t.failures.sweep()).toEqual([{ nodeId: 'a', lost: [], paused: ['s1'] }]);
    await expect(t.placements.lookup('s1')).resolves.toMatchObject({
      nodeStatus: 'unhealthy',
      binding: { state: 'paused', pauseLocalOnly: true },
    });
    expect(await t.events.list('s1')).toEqual([]);

    await silence(t, s.nodeGoneAfterMs);
    expect(await t.failures.sweep()).toEqual([{ nodeId: 'a', lost: ['s1'], paused: [] }]);
    expect(await t.failures.sweep()).toEqual([]);
    const { binding } = await t.placements.lookup('s1');
    expect(binding.state).toBe('lost');
    expect(binding.lostReason).toMatch(
      /^node failure: node a stopped heartbeating .* before its pause was stored/,
    );
    const [event] = await t.events.list('s1');
    expect(event).toMatchObject({ type: 'lost', details: { previous_state: 'paused' } });
  });

  it('comes back with its node: the roster says whether it is stored now', async () => {
    const t = await pausedOnA();
    await silence(t, 3 * s.heartbeatIntervalMs + 1000);
    await t.failures.sweep();
    const back = (over = {}) =>
      t.membership.heartbeat(
        heartbeat('a', { bootId: 'boot-2', roster: [running('s1', { state: 'paused', ...over })] }),
      );
    await back({ pauseId: 'old', pauseLocalOnly: true });
    await expect(t.placements.lookup('s1')).resolves.toMatchObject({
      nodeStatus: 'ready',
      binding: { state: 'paused', pauseLocalOnly: true },
    });
    await back({ pauseId: 'new' });
    const { binding } = await t.placements.lookup('s1');
    expect(binding).toMatchObject({ state: 'paused', pauseId: 'new' });
    expect(binding.pauseLocalOnly).toBeUndefined();
  });

  it('a pause that waited for its upload is recorded as stored', async () => {
    const { membership, placements } = setup();
    await membership.heartbeat(heartbeat('a', { roster: [running('s1')] }));
    await placements.recordPause({ nodeId: 'a', sandboxId: 's1', stored: true });
    const { binding } = await placements.lookup('s1');
    expect(binding.state).toBe('paused');
    expect(binding.pauseLocalOnly).toBeUndefined();
    await expect(placements.recordPause({ nodeId: 'x', sandboxId: 's1', stored: true })).rejects.toThrow(
      /not registered/,
    );
  });
});

describe('a sandbox its node reports lost after a crash', () => {
  it('is lost, with the reason, although the binding still said paused and the roster dropped it', async () => {
    const t = await pausedOnA();
    // Resumed just before the crash: no heartbeat said so. The node came back without it.
    t.clock.advance(2 * s.heartbeatIntervalMs);
    await t.membership.heartbeat(heartbeat('a', { bootId: 'second', roster: [] }));
    await t.placements.recordLoss({ nodeId: 'a', sandboxId: 's1', reason: 'node_restart' });
    const { binding } = await t.placements.lookup('s1');
    expect(binding).toMatchObject({ state: 'lost', nodeId: 'a', lostReason: 'node_restart' });
    // Its next rosters, which do not list it, keep it lost.
    t.clock.advance(s.heartbeatIntervalMs);
    await t.membership.heartbeat(heartbeat('a', { bootId: 'second', roster: [] }));
    await expect(t.placements.lookup('s1')).resolves.toMatchObject({ binding: { state: 'lost' } });
  });

  it('leaves a sandbox that runs on another node now as it is', async () => {
    const t = setup();
    await t.membership.heartbeat(heartbeat('b', { roster: [running('s1')] }));
    await t.membership.heartbeat(heartbeat('a'));
    await t.placements.recordLoss({ nodeId: 'a', sandboxId: 's1', reason: 'node_restart' });
    await expect(t.placements.lookup('s1')).resolves.toMatchObject({
      binding: { state: 'running', nodeId: 'b' },
    });
  });
});
