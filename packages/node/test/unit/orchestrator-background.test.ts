import { describe, expect, it } from 'vitest';
import { FakeNode } from '@agentenv/test-support/fakes';
import { hasExpired } from '../../src/orchestrator/expiry.js';

describe('orchestrator: TTL', () => {
  it('pauses a sandbox whose time is up (autoPause), kills one without; paused ones never expire', async () => {
    const node = new FakeNode();
    const orch = node.orchestrator;
    const paused = await node.create({ timeoutSecs: 5 });
    const killed = await node.create({ timeoutSecs: 5, autoPause: false });
    const lasting = await node.create({ timeoutSecs: 60 });
    orch.startTtlLoop(1000);
    node.clock.advance(4000);
    await orch.backgroundIdle();
    expect(orch.get(paused.sandboxId).state).toBe('running');
    node.clock.advance(1000);
    await orch.backgroundIdle();
    expect(orch.get(paused.sandboxId).state).toBe('paused');
    expect(orch.find(killed.sandboxId)).toBeUndefined();
    expect(orch.get(lasting.sandboxId).state).toBe('running');
    expect(node.observer.of(paused.sandboxId).at(-1)).toBe('paused:timeout');
    expect(node.observer.of(killed.sandboxId).at(-1)).toBe('killed:timeout');
    node.clock.advance(3600_000);
    await orch.backgroundIdle();
    expect(orch.get(paused.sandboxId).state).toBe('paused');
    expect(orch.get(lasting.sandboxId).state).toBe('paused');
  });

  it('refuses to start a periodic loop twice (two would overlap their work)', () => {
    const node = new FakeNode({ hostMemoryBytes: 64 * 2 ** 30, memoryLimitMb: 600 });
    node.orchestrator.startTtlLoop(1000);
    expect(() => node.orchestrator.startTtlLoop(1000)).toThrow(/ttl-sweep is already running/);
    node.orchestrator.startMemoryWatch();
    expect(() => node.orchestrator.startMemoryWatch()).toThrow(/memory-pressure is already running/);
  });

  it('a sandbox given more time does not expire at its old end', async () => {
    const node = new FakeNode();
    const rec = await node.create({ timeoutSecs: 5 });
    node.orchestrator.startTtlLoop(1000);
    node.clock.advance(3000);
    await node.orchestrator.refresh(rec.sandboxId, 60);
    node.clock.advance(10_000);
    await node.orchestrator.backgroundIdle();
    expect(node.orchestrator.get(rec.sandboxId).state).toBe('running');
  });

  it('starts one action per sandbox, however many sweeps pass while it runs', async () => {
    const node = new FakeNode();
    const rec = await node.create({ timeoutSecs: 1 });
    node.orchestrator.startTtlLoop(1000);
    const held = node.driver.faults.hold('checkpoint');
    node.clock.advance(1000);
    await held.reached;
    node.clock.advance(5000);
    held.release();
    await node.orchestrator.backgroundIdle();
    expect(node.driver.faults.calls('checkpoint')).toBe(1);
    expect(node.orchestrator.get(rec.sandboxId).state).toBe('paused');
  });

  it('a failed TTL pause is tried again at the next sweep', async () => {
    const node = new FakeNode();
    const rec = await node.create({ timeoutSecs: 1 });
    node.orchestrator.startTtlLoop(1000);
    node.driver.faults.failNext('pause');
    node.clock.advance(1000);
    await node.orchestrator.backgroundIdle();
    expect(node.orchestrator.get(rec.sandboxId).state).toBe('running');
    node.clock.advance(1000);
    await node.orchestrator.backgroundIdle();
    expect(node.orchestrator.get(rec.sandboxId).state).toBe('paused');
  });

  it('expires running sandboxes only, at their end time', () => {
    const base = { endAt: '2026-01-01T00:00:10.000Z' } as const;
    const at = Date.parse(base.endAt);
    expect(hasExpired({ ...base, state: 'running' } as never, at)).toBe(true);
    expect(hasExpired({ ...base, state: 'running' } as never, at - 1)).toBe(false);
    for (const state of ['paused', 'pausing', 'creating', 'killing'])
      expect(hasExpired({ ...base, state } as never, at + 1)).toBe(false);
  });
});

describe('orchestrator: runtime exits', () => {
  it('a sandbox that dies is removed with its slot and stored pause; the exit is reported', async () => {
    const node = new FakeNode();
    const rec = await node.create();
    await node.orchestrator.pause(rec.sandboxId);
    await node.orchestrator.connect(rec.sandboxId, 60);
    const { handle, pauseId } = node.orchestrator.get(rec.sandboxId);
    node.driver.crash(handle!.id, 'envd exited with code 1');
    await node.orchestrator.backgroundIdle();
    expect(node.orchestrator.find(rec.sandboxId)).toBeUndefined();
    expect(node.slots.used).toBe(0);
    expect(node.storage.pauses.has(pauseId!)).toBe(false);
    expect(node.observer.failures).toContain('runtime');
    const exited = node.observer.events.at(-1)!;
    expect(exited).toMatchObject({
      type: 'exited',
      reason: 'runtime_exit',
      details: { reason: 'envd exited with code 1' },
    });
  });

  it('an exit during an operation is handled after it, from the state it left', async () => {
    const node = new FakeNode();
    const rec = await node.create();
    const held = node.driver.faults.hold('checkpoint');
    const snap = node.orchestrator.snapshot(rec.sandboxId);
    await held.reached;
    node.driver.crash(rec.handle!.id);
    held.release();
    await snap.catch(() => undefined);
    await node.orchestrator.backgroundIdle();
    expect(node.orchestrator.find(rec.sandboxId)).toBeUndefined();
    expect(node.slots.used).toBe(0);
  });

  it('a warm sandbox that dies leaves the pool and gives its slot back', async () => {
    const node = new FakeNode({ poolSize: 1 });
    await node.create();
    await waitForPool(node, 1);
    const pooled = node.driver
      .running()
      .find((h) => !node.orchestrator.list().some((r) => r.handle?.id === h.id))!;
    node.driver.crash(pooled.id);
    await node.orchestrator.backgroundIdle();
    expect(node.pool.sizes().base).toBe(0);
    expect(node.slots.used).toBe(1);
  });
});

describe('orchestrator: shutdown', () => {
  it('pauses every running sandbox, stops the TTL loop and refuses new work', async () => {
    const node = new FakeNode({ poolSize: 1 });
    const a = await node.create();
    const b = await node.create();
    await node.orchestrator.pause(b.sandboxId);
    node.orchestrator.startTtlLoop(1000);
    await node.orchestrator.shutdown();
    expect(node.orchestrator.get(a.sandboxId).state).toBe('paused');
    expect(node.observer.of(a.sandboxId).at(-1)).toBe('paused:shutdown');
    expect(node.orchestrator.isShuttingDown).toBe(true);
    expect(node.driver.running()).toEqual([]);
    expect(node.slots.used).toBe(0);
    expect(node.clock.pending).toBe(0);
  });
});

async function waitForPool(node: FakeNode, n: number): Promise<void> {
  for (let i = 0; i < 100 && (node.pool.sizes().base ?? 0) < n; i++)
    await new Promise((r) => setImmediate(r));
  expect(node.pool.sizes().base).toBe(n);
}
