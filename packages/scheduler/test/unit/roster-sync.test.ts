import { describe, expect, it } from 'vitest';
import type { Binding } from '../../src/model.js';
import { RosterSync } from '../../src/membership/roster-sync.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { ManualClock, running, settings } from './helpers.js';

function setup() {
  const clock = new ManualClock();
  const store = new MemoryStore(clock);
  const s = settings();
  const written: string[] = [];
  const putBindings = store.putBindings.bind(store);
  store.putBindings = async (bs: readonly Binding[], ttl: number) => {
    written.push(...bs.map((b) => b.sandboxId));
    return putBindings(bs, ttl);
  };
  const sync = new RosterSync(store, s);
  const state = async (id: string) => (await store.getBindings([id])).get(id)?.state;
  return { clock, store, s, sync, written, state };
}

const roster = (n: number) => Array.from({ length: n }, (_, i) => running(`s${i}`));

describe('roster sync', () => {
  it("writes only the entries that changed since the node's last roster, and drops the ones it no longer lists", async () => {
    const { clock, sync, written, state } = setup();
    await sync.sync('a', roster(50), clock.now(), false);
    expect(written).toHaveLength(50);
    written.length = 0;
    clock.advance(2000);
    const next = [...roster(50).slice(1), running('new')];
    next[10] = running('s11', { state: 'pausing' });
    await sync.sync('a', next, clock.now(), true);
    expect(written.sort()).toEqual(['new', 's11']);
    expect(await state('s0')).toBeUndefined();
    expect(await state('s11')).toBe('pausing');
    expect(await state('s20')).toBe('running');
  });

  it('writes a paused entry again once its pause is stored (only the pause-local flag changed)', async () => {
    const { clock, store, sync, written } = setup();
    const paused = running('p', { state: 'paused', pauseId: 'pz', pauseLocalOnly: true });
    await sync.sync('a', [paused], clock.now(), false);
    expect((await store.getBindings(['p'])).get('p')?.pauseLocalOnly).toBe(true);
    written.length = 0;
    clock.advance(2000);
    const { pauseLocalOnly: _local, ...stored } = paused;
    await sync.sync('a', [stored], clock.now(), true);
    expect(written).toEqual(['p']);
    expect((await store.getBindings(['p'])).get('p')?.pauseLocalOnly).toBeUndefined();
  });

  it('sets right, at the next roster, a binding written from elsewhere since (a late pause record)', async () => {
    const { clock, store, sync } = setup();
    const stored = running('p', { state: 'paused', pauseId: 'pz' });
    await sync.sync('a', [stored], clock.now(), false);
    // The gateway's record of the pause, from the node's answer before its upload ended.
    const b = (await store.getBindings(['p'])).get('p')!;
    await store.putBindings([{ ...b, pauseLocalOnly: true }], 60_000);
    sync.recheck('a', ['p']);
    clock.advance(2000);
    await sync.sync('a', [stored], clock.now(), true);
    expect((await store.getBindings(['p'])).get('p')?.pauseLocalOnly).toBeUndefined();
  });

  it('reads the roster whole again once the store came back, and writes back what it lost', async () => {
    const { clock, store, sync, written, state } = setup();
    await sync.sync('a', roster(3), clock.now(), false);
    clock.advance(2000);
    // A Redis restarted from its append-only file, without its last second of writes.
    await store.deleteBindings(['s1'], 'a');
    store.reconnectedAtMs = () => clock.now();
    written.length = 0;
    clock.advance(2000);
    await sync.sync('a', roster(3), clock.now(), true);
    expect(written).toEqual(['s1']);
    expect(await state('s1')).toBe('running');
    written.length = 0;
    clock.advance(2000);
    await sync.sync('a', roster(3), clock.now(), true);
    expect(written).toEqual([]);
  });

  it('drops an assignment the roster never lists once its grace is over', async () => {
    const { clock, store, s, sync, state } = setup();
    await sync.sync('a', roster(3), clock.now(), false);
    await store.putBindings(
      [{ ...running('x'), nodeId: 'a', source: 'assignment', updatedMs: clock.now() }],
      s.bindingTtlMs,
    );
    sync.assignedTo('a', ['x']);
    clock.advance(2000);
    await sync.sync('a', roster(3), clock.now(), true);
    expect(await state('x')).toBe('running');
    clock.advance(2 * s.heartbeatIntervalMs);
    await sync.sync('a', roster(3), clock.now(), true);
    expect(await state('x')).toBeUndefined();
  });

  it('keeps a sandbox declared lost lost when its node lists it again, and fences it at every roster until it is gone', async () => {
    const { clock, store, s, sync, state } = setup();
    await sync.sync('a', roster(3), clock.now(), false);
    await store.putBindings(
      [{ ...running('s1'), nodeId: 'a', state: 'lost', source: 'roster', updatedMs: clock.now() }],
      s.bindingTtlMs,
    );
    clock.advance(8000);
    expect(await sync.sync('a', roster(3), clock.now(), false)).toEqual(['s1']);
    clock.advance(2000);
    expect(await sync.sync('a', roster(3), clock.now(), true)).toEqual(['s1']);
    expect(await state('s1')).toBe('lost');
    clock.advance(2000);
    expect(await sync.sync('a', roster(3).slice(0, 1).concat(roster(3).slice(2)), clock.now(), true)).toEqual(
      [],
    );
    expect(await state('s1')).toBe('lost');
  });

  it('sets right what another writer changed of an unchanged entry on its periodic full pass, or at once after a silence', async () => {
    const { clock, store, s, sync, state } = setup();
    await sync.sync('a', roster(3), clock.now(), false);
    // Another replica's write from an older roster of the node.
    const stale = (id: string) =>
      store.putBindings(
        [{ ...running(id), nodeId: 'a', state: 'pausing', source: 'roster', updatedMs: clock.now() }],
        s.bindingTtlMs,
      );
    await stale('s1');
    clock.advance(2000);
    await sync.sync('a', roster(3), clock.now(), true);
    // The entry is unchanged since this process last saw it: its binding is not read...
    expect(await state('s1')).toBe('pausing');
    clock.advance(s.bindingTtlMs / 3);
    await sync.sync('a', roster(3), clock.now(), true);
    // ...until the full pass, which takes the node's word.
    expect(await state('s1')).toBe('running');
    await stale('s2');
    clock.advance(2000);
    await sync.sync('a', roster(3), clock.now(), false);
    expect(await state('s2')).toBe('running');
  });
});
