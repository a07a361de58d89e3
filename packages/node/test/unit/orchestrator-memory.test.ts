import { describe, expect, it } from 'vitest';
import { errorBody } from '@agentenv/common';
import { FakeNode, rejection } from '@agentenv/test-support/fakes';
import {
  choosePressurePauses,
  memoryRefusal,
  pressureExcess,
  PRESSURE_MIN_IDLE_MS,
  type MemoryFigures,
} from '../../src/orchestrator/index.js';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const figures = (over: Partial<MemoryFigures> = {}): MemoryFigures => ({
  nominal: 0,
  measured: 0,
  free: 8 * GiB,
  hostTotal: 8 * GiB,
  ...over,
});

describe('memory admission', () => {
  it('lets nominal memory reach the overcommit ratio times host memory, not beyond', () => {
    expect(memoryRefusal(GiB, 0, figures({ nominal: 31 * GiB }), 4)).toBeUndefined();
    const refusal = memoryRefusal(GiB, 0, figures({ nominal: 31.5 * GiB }), 4);
    expect(errorBody(refusal!)).toMatchObject({ status: 429, retryAfter: 5 });
    expect(refusal!.message).toMatch(/exceeds 4 × its 8192 MiB/);
  });

  it('needs the sandbox and the starts in flight to fit in free memory', () => {
    expect(memoryRefusal(GiB, GiB, figures({ free: 2 * GiB }), 4)).toBeUndefined();
    const refusal = memoryRefusal(GiB, GiB, figures({ free: 2 * GiB - 1 }), 4);
    expect(refusal?.kind).toBe('capacity');
    expect(refusal!.message).toMatch(/MiB of memory free; the sandbox needs 1024 MiB/);
  });
});

describe('memory pressure', () => {
  it('is what measured memory exceeds the limit by, or free memory lacks to the low-water mark', () => {
    expect(pressureExcess(figures({ measured: 3 * GiB }))).toBe(0);
    expect(pressureExcess(figures({ measured: 3 * GiB, limit: 2 * GiB }))).toBe(GiB);
    // Low water is 5 % of host memory.
    expect(pressureExcess(figures({ free: 0.05 * 8 * GiB - MiB }))).toBe(MiB);
    expect(pressureExcess(figures({ measured: 3 * GiB, limit: 2 * GiB, free: 0 }))).toBe(GiB);
  });

  it('chooses the least recently used idle sandboxes, as few as cover the excess', () => {
    const idle = PRESSURE_MIN_IDLE_MS;
    const candidates = [
      { sandboxId: 'recent', idleMs: idle + 1, bytes: GiB },
      { sandboxId: 'oldest', idleMs: idle + 300, bytes: GiB },
      { sandboxId: 'busy', idleMs: 0, bytes: 4 * GiB },
      { sandboxId: 'active', idleMs: idle - 1, bytes: 4 * GiB },
      { sandboxId: 'older', idleMs: idle + 200, bytes: GiB },
    ];
    expect(choosePressurePauses(candidates, 1)).toEqual(['oldest']);
    expect(choosePressurePauses(candidates, GiB + 1)).toEqual(['oldest', 'older']);
    expect(choosePressurePauses(candidates, 100 * GiB)).toEqual(['oldest', 'older', 'recent']);
    expect(choosePressurePauses(candidates, 0)).toEqual([]);
  });
});

describe('orchestrator: memory', () => {
  it('refuses a create once nominal memory reaches the overcommit ratio (the capacity error, with Retry-After)', async () => {
    // 4 GiB host × 4: sixteen 1 GiB sandboxes.
    const node = new FakeNode({ hostMemoryBytes: 4 * GiB, maxSandboxes: 100 });
    for (let i = 0; i < 16; i++) await node.create();
    const err = await rejection(node.create());
    expect(errorBody(err)).toMatchObject({ status: 429, retryAfter: 5 });
    expect(node.orchestrator.memoryFigures()).toMatchObject({ nominal: 16 * GiB, hostTotal: 4 * GiB });
  });

  it('counts a frozen sandbox at its measured working set against the overcommit ceiling', async () => {
    // 4 GiB host × 4: sixteen 1 GiB sandboxes, unless some are frozen.
    const node = new FakeNode({ hostMemoryBytes: 4 * GiB, maxSandboxes: 100 });
    node.orchestrator.startIdleLoop();
    const idle = [];
    for (let i = 0; i < 16; i++) idle.push(await node.create());
    // Measured (the fake's working set is a quarter of its size), then frozen by the idle loop.
    for (const r of idle) await node.orchestrator.usage(r.sandboxId);
    await node.elapse(10_000);
    expect(node.orchestrator.memoryFigures()).toMatchObject({ nominal: 4 * GiB });
    for (let i = 0; i < 12; i++) await node.create();
    expect(errorBody(await rejection(node.create()))).toMatchObject({ status: 429 });
    // A thaw brings a sandbox back to its full size.
    await node.orchestrator.usage(idle[0]!.sandboxId);
    await node.orchestrator.connect(idle[0]!.sandboxId, 60);
    expect(node.orchestrator.memoryFigures()!.nominal).toBe(16 * GiB + 0.75 * GiB);
  });

  it('counts measured memory against what the host has available', async () => {
    const node = new FakeNode({ hostMemoryBytes: 64 * GiB, memoryBytes: 2.5 * GiB });
    node.orchestrator.startMemoryWatch();
    await node.orchestrator.backgroundIdle();
    const a = await node.create();
    await node.create();
    // Two unsampled sandboxes count at their nominal 1 GiB: 0.5 GiB is left, a third is refused.
    expect(node.orchestrator.memoryFigures()!.free).toBe(0.5 * GiB);
    expect(errorBody(await rejection(node.create()))).toMatchObject({ status: 429 });
    // Once measured (the fake's working set is a quarter of its size) and the host read again.
    await node.orchestrator.usage(a.sandboxId);
    expect(node.orchestrator.memoryFigures()!.measured).toBe(1.25 * GiB);
  });

  it('pauses the least recently used idle sandbox under pressure and resumes it on request', async () => {
    const node = new FakeNode({ hostMemoryBytes: 64 * GiB, memoryLimitMb: 600 });
    const a = await node.create();
    const b = await node.create({ timeoutSecs: 3600 });
    const c = await node.create();
    node.clock.advance(1000);
    node.orchestrator.activity.touch(a.sandboxId);
    node.clock.advance(1000);
    node.orchestrator.activity.touch(c.sandboxId);
    // 256 MiB measured each: 768 MiB against a 600 MiB limit, one pause covers it.
    for (const r of [a, b, c]) await node.orchestrator.usage(r.sandboxId);
    node.orchestrator.startMemoryWatch();
    await node.orchestrator.backgroundIdle();
    expect(node.orchestrator.get(b.sandboxId).state).toBe('running');
    node.clock.advance(PRESSURE_MIN_IDLE_MS);
    await node.orchestrator.backgroundIdle();
    const paused = node.orchestrator.get(b.sandboxId);
    expect(paused).toMatchObject({ state: 'paused', pausedForMemory: true });
    expect(node.orchestrator.get(a.sandboxId).state).toBe('running');
    expect(node.orchestrator.get(c.sandboxId).state).toBe('running');
    expect(node.observer.of(b.sandboxId)).toEqual(['created:request', 'paused:memory_pressure']);
    expect(node.orchestrator.memoryFigures()!.measured).toBe(512 * MiB);

    // autoResume is off, but a request resumes a sandbox paused for memory, with its end time.
    expect(await node.orchestrator.resumeForMemory(b.sandboxId)).toBe(true);
    const resumed = node.orchestrator.get(b.sandboxId);
    expect(resumed.state).toBe('running');
    expect(resumed.pausedForMemory).toBeUndefined();
    expect(resumed.endAt).toBe(b.endAt);
    expect(node.observer.of(b.sandboxId).at(-1)).toBe('resumed:memory_pressure');
    expect(await node.orchestrator.resumeForMemory(a.sandboxId)).toBe(false);
  });

  it('does not pause a chosen sandbox whose client opened a request before its turn (a command stream is never cut)', async () => {
    const node = new FakeNode({ hostMemoryBytes: 64 * GiB, memoryLimitMb: 300 });
    const a = await node.create();
    const b = await node.create();
    const c = await node.create();
    node.clock.advance(PRESSURE_MIN_IDLE_MS);
    node.orchestrator.activity.touch(c.sandboxId);
    // 768 MiB measured against 300: a and b are chosen, paused one after the other.
    for (const r of [a, b, c]) await node.orchestrator.usage(r.sandboxId);
    const held = node.driver.faults.hold('checkpoint');
    node.orchestrator.startMemoryWatch();
    await held.reached;
    // While a is being paused, a command starts streaming from b.
    const streamEnded = node.orchestrator.activity.begin(b.sandboxId);
    held.release();
    await node.orchestrator.backgroundIdle();
    expect(node.orchestrator.get(a.sandboxId).state).toBe('paused');
    expect(node.orchestrator.get(b.sandboxId).state).toBe('running');
    expect(node.observer.of(b.sandboxId)).toEqual(['created:request']);
    streamEnded();
  });
});
