import { describe, expect, it } from 'vitest';
import type { Reservation } from '../../src/model.js';
import { NodeIndex } from '../../src/membership/node-index.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { ManualClock, nodeRecord } from './helpers.js';

const rsv = (id: string, nodeId: string, expiresMs: number): Reservation => ({
  id,
  nodeId,
  resources: { cpuCount: 2, memoryMib: 1024 },
  count: 1,
  createdMs: 0,
  expiresMs,
});

function setup() {
  const clock = new ManualClock();
  const store = new MemoryStore(clock);
  const index = new NodeIndex(store, clock, 500);
  const reserved = (nodeId: string) =>
    index.candidates(() => 'ready').find((c) => c.node.nodeId === nodeId)?.reserved.count;
  return { clock, store, index, reserved };
}

/** Starts a reload and holds it once it has read the store's reservations, until `release`. */
async function reloadHeldAfterRead(store: MemoryStore, index: NodeIndex) {
  let release: (() => void) | undefined;
  const list = store.listReservations.bind(store);
  store.listReservations = async () => {
    const read = await list();
    await new Promise<void>((r) => (release = r));
    return read;
  };
  const reloading = index.ready();
  while (!release) await new Promise((r) => setImmediate(r));
  return { reloading, release: () => release!() };
}

describe('node index', () => {
  it("counts its own reservations at once, another replica's after its next reload, and none past expiry", async () => {
    const { clock, store, index, reserved } = setup();
    await store.putNode(nodeRecord('a'), [], 60_000);
    await index.ready();
    const mine = rsv('mine', 'a', clock.now() + 5000);
    index.putReservations([mine]);
    await store.putReservations([mine, rsv('theirs', 'a', clock.now() + 5000)]);
    expect(reserved('a')).toBe(1);
    clock.advance(500);
    // Old enough: the next decision reloads it first, and counts it from then on.
    await index.ready();
    expect(reserved('a')).toBe(2);
    clock.advance(4500);
    expect(reserved('a')).toBe(0);
  });

  it('keeps a change made while a reload was reading', async () => {
    const { clock, store, index, reserved } = setup();
    await store.putNode(nodeRecord('a'), [], 60_000);
    await index.ready();
    clock.advance(500);
    const { reloading, release } = await reloadHeldAfterRead(store, index);
    index.putReservations([rsv('during', 'a', clock.now() + 5000)]);
    release();
    await reloading;
    expect(reserved('a')).toBe(1);
    index.takeReservation('during');
    expect(reserved('a')).toBe(0);
  });

  it('keeps its own reservation whose store write had not answered when a reload read the store', async () => {
    const { clock, store, index, reserved } = setup();
    await store.putNode(nodeRecord('a'), [], 60_000);
    await index.ready();
    const pending = rsv('pending', 'a', clock.now() + 5000);
    index.putReservations([pending]);
    clock.advance(500);
    await index.ready();
    expect(reserved('a')).toBe(1);
    await store.putReservations([pending]);
    index.saved('pending');
    clock.advance(500);
    await index.ready();
    expect(reserved('a')).toBe(1);
  });

  it('keeps its own reservation whose store write answered while a reload was reading without it', async () => {
    const { clock, store, index, reserved } = setup();
    await store.putNode(nodeRecord('a'), [], 60_000);
    await index.ready();
    const racing = rsv('racing', 'a', clock.now() + 5000);
    index.putReservations([racing]);
    clock.advance(500);
    const { reloading, release } = await reloadHeldAfterRead(store, index);
    // The write lands (and answers) after the reload read the store without it.
    await store.putReservations([racing]);
    index.saved('racing');
    release();
    await reloading;
    expect(reserved('a')).toBe(1);
  });
});
