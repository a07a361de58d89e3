import { describe, expect, it } from 'vitest';
import { FakeNode, FakeTemplates, until } from '@agentenv/test-support/fakes';

const pooled = (node: FakeNode) => node.pool.sizes().base ?? 0;

describe('warm pool', () => {
  it('fills up to its size after the first create and hands its sandboxes to creates', async () => {
    const node = new FakeNode({ poolSize: 2 });
    await node.create();
    await until(() => pooled(node) === 2, 'a full pool');
    const waiting = node.driver.running().map((h) => h.id);
    const rec = await node.create({ envVars: { X: 'y' } });
    // The create took a waiting sandbox (only /init was left to do); a refill follows it.
    expect(waiting).toContain(rec.handle!.id);
    // The pool had given it an /init of its own (a boot id, no time, nothing of a create's) before
    // freezing it.
    const inits = node.envd.inits.filter((i) => i.host === rec.handle!.net!.hostAddress).map((i) => i.init);
    expect(inits.at(-2)).toMatchObject({ envVars: {}, bootId: expect.any(String) });
    expect(inits.at(-2)?.timestamp).toBeUndefined();
    expect(node.envd.initOf(rec.handle!.net!.hostAddress)?.envVars.X).toBe('y');
    await until(() => pooled(node) === 2, 'a refilled pool');
    expect(node.slots.used).toBe(2 + 2);
  });

  it('keeps its waiting sandboxes frozen and thaws the one a create takes', async () => {
    const node = new FakeNode({ poolSize: 2 });
    const first = await node.create();
    await until(() => pooled(node) === 2, 'a full pool');
    const waiting = node.driver.running().filter((h) => h.id !== first.handle!.id);
    const states = await Promise.all(waiting.map((h) => node.driver.status(h)));
    expect(states).toEqual(['frozen', 'frozen']);
    const rec = await node.create();
    expect(waiting.map((h) => h.id)).toContain(rec.handle!.id);
    expect(await node.driver.status(rec.handle!)).toBe('running');
  });

  it('a sandbox that cannot be frozen is killed rather than kept waiting', async () => {
    const node = new FakeNode({ poolSize: 1 });
    node.driver.faults.failNext('freeze');
    await node.create();
    // The refill's freeze failed: its sandbox and slot are gone; the next create fills the pool.
    await until(() => node.driver.running().length === 1 && node.slots.used === 1, 'the sandbox killed');
    expect(pooled(node)).toBe(0);
    await node.create();
    await until(() => pooled(node) === 1);
  });

  it('a waiting sandbox that cannot be thawed is dropped and the create restores a fresh one', async () => {
    const node = new FakeNode({ poolSize: 1 });
    await node.create();
    await until(() => pooled(node) === 1, 'a full pool');
    const before = node.driver.running().map((h) => h.id);
    node.driver.faults.failNext('thaw');
    const rec = await node.create();
    expect(before).not.toContain(rec.handle!.id);
    expect(await node.driver.status(rec.handle!)).toBe('running');
    // The one that failed to thaw is gone with its slot; the refill put another in its place.
    await until(() => pooled(node) === 1, 'a refilled pool');
    expect(node.driver.running()).toHaveLength(3);
    expect(node.slots.used).toBe(3);
  });

  it('closing it while a refill is freezing its sandbox kills that sandbox', async () => {
    const node = new FakeNode({ poolSize: 1 });
    const freezing = node.driver.faults.hold('freeze');
    await node.create();
    await freezing.reached;
    const closing = node.pool.close();
    freezing.release();
    await closing;
    expect(node.driver.running()).toHaveLength(1);
    expect(node.slots.used).toBe(1);
  });

  it('sets the egress rules of the create on the sandbox it takes', async () => {
    const node = new FakeNode({ poolSize: 1 });
    await node.create();
    await until(() => pooled(node) === 1);
    const egress = { allowInternet: false, allowOut: ['1.2.3.4'], denyOut: [] };
    const rec = await node.create({ egress });
    expect(node.slots.egressOf(rec.handle!.net as never)).toEqual(egress);
  });

  it('does not take snapshots or cold images from it', async () => {
    const node = new FakeNode({ poolSize: 1 });
    await node.create({
      source: {
        kind: 'image',
        image: 'busybox',
        resources: { cpuCount: 1, memoryMB: 256, diskSizeMB: 1024 },
      },
    });
    expect(node.pool.sizes()).toEqual({});
  });

  it('kills the waiting sandboxes of a template that was rebuilt', async () => {
    const node = new FakeNode({ poolSize: 2 });
    await node.create();
    await until(() => pooled(node) === 2);
    const old = node.driver.running().filter((h) => h.restoredFrom === FakeTemplates.dir('base', 1));
    expect(old).toHaveLength(3);
    node.templates.rebuild('base');
    const rec = await node.create();
    expect(rec.handle!.restoredFrom).toBe(FakeTemplates.dir('base', 2));
    await until(() => pooled(node) === 2, 'a pool of the new build');
    const left = node.driver.running().map((h) => h.restoredFrom);
    // The first create's sandbox runs on; the waiting ones of build 1 are gone.
    expect(left.filter((d) => d === FakeTemplates.dir('base', 1))).toHaveLength(1);
    expect(node.slots.used).toBe(2 + 2);
  });

  it('kills the waiting sandboxes of a template that was deleted, at the next create of another', async () => {
    const node = new FakeNode({ poolSize: 1 });
    node.templates.rebuild('other');
    await node.create({ source: { kind: 'named', name: 'other' } });
    await until(() => node.pool.sizes().other === 1);
    node.templates.remove('other');
    await node.create();
    await until(() => node.pool.sizes().other === undefined, 'the deleted template gone from the pool');
    await until(() => pooled(node) === 1);
    // Only the sandbox created from it runs on.
    expect(node.driver.running().filter((h) => h.restoredFrom?.includes('/other-'))).toHaveLength(1);
  });

  it('does not refill while the host is short of memory', async () => {
    const node = new FakeNode({ poolSize: 2, memoryBytes: 2 * 2 ** 30 });
    await node.create();
    await new Promise((r) => setImmediate(r));
    expect(pooled(node)).toBe(0);
    node.memory.bytes = 64 * 2 ** 30;
    await node.create();
    await until(() => pooled(node) === 2);
  });

  it('a failed refill gives its slot back and the next create tries again', async () => {
    const node = new FakeNode({ poolSize: 1 });
    await node.create();
    await until(() => pooled(node) === 1);
    node.driver.faults.failNext('restore');
    const restores = node.driver.faults.calls('restore');
    await node.create();
    // The create took the waiting sandbox; the refill behind it failed and gave its slot back.
    await until(
      () => node.driver.faults.calls('restore') === restores + 1 && node.slots.used === 2,
      'the failed refill cleaned up',
    );
    expect(pooled(node)).toBe(0);
    await node.create();
    await until(() => pooled(node) === 1);
    expect(node.slots.used).toBe(4);
  });

  it('closing it kills every waiting sandbox', async () => {
    const node = new FakeNode({ poolSize: 2 });
    await node.create();
    await until(() => pooled(node) === 2);
    await node.pool.close();
    expect(node.driver.running()).toHaveLength(1);
    expect(node.slots.used).toBe(1);
  });

  it('closing it waits for a refill under way and kills the sandbox it restored', async () => {
    const node = new FakeNode({ poolSize: 1 });
    await node.create();
    await until(() => pooled(node) === 1);
    const refill = node.driver.faults.hold('restore');
    // Taken from the pool; the refill after it is held in its restore.
    await node.create();
    await refill.reached;
    let closed = false;
    const closing = node.pool.close().then(() => (closed = true));
    await new Promise((r) => setImmediate(r));
    expect(closed).toBe(false);
    refill.release();
    await closing;
    expect(node.driver.running()).toHaveLength(2);
    expect(node.slots.used).toBe(2);
  });
});
