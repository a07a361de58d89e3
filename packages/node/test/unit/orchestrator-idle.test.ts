import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { errorBody } from '@agentenv/common';
import { FakeClock, FakeNode, rejection, type FakeNodeOptions } from '@agentenv/test-support/fakes';
import { defaults, envOverrides } from '../../src/config/load.js';
import { ActivityTracker } from '../../src/orchestrator/activity.js';
import { busierThan } from '../../src/orchestrator/idle.js';
import { SandboxProxy } from '../../src/proxy/proxy.js';

/** FakeNode's config freezes after 10 s idle (the default); the sweep looks every second. */
const IDLE_MS = 10_000;
const SWEEP_MS = 1000;

async function idleNode(opts: FakeNodeOptions = {}) {
  const { node, orch, id, rec } = await FakeNode.withRunning(opts);
  orch.startIdleLoop();
  const status = () => node.driver.status(rec.handle!);
  const pass = (ms: number) => node.elapse(ms, SWEEP_MS);
  return { node, orch, id, status, pass };
}

describe('orchestrator: idle sandboxes are frozen', () => {
  it('freezes a sandbox nobody used for idle_freeze_secs, not before', async () => {
    const { status, pass, node } = await idleNode();
    await pass(IDLE_MS - 1000);
    expect(await status()).toBe('running');
    await pass(1000);
    expect(await status()).toBe('frozen');
    expect(node.driver.faults.calls('freeze')).toBe(1);
    await pass(IDLE_MS * 3);
    expect(node.driver.faults.calls('freeze')).toBe(1);
  });

  it('a request through the proxy thaws a frozen sandbox before it is forwarded', async () => {
    const { node, orch, id, status, pass } = await idleNode();
    await pass(IDLE_MS);
    expect(await status()).toBe('frozen');
    const proxy = new SandboxProxy(orch, pino({ level: 'silent' }));
    const target = await proxy.resolve({ sandboxId: id, port: 8000, path: '/', native: false }, {});
    expect(target.address).toBe(orch.target(id)!.address);
    expect(await status()).toBe('running');
    expect(node.driver.faults.calls('thaw')).toBe(1);
    // The request counted as use: idle again from then on.
    await pass(IDLE_MS - 1000);
    expect(await status()).toBe('running');
    await pass(1000);
    expect(await status()).toBe('frozen');
  });

  it('an open request (a running command) keeps the sandbox awake however long it lasts', async () => {
    const { orch, id, status, pass } = await idleNode();
    const end = orch.activity.begin(id);
    await pass(IDLE_MS * 6);
    expect(await status()).toBe('running');
    end();
    await pass(IDLE_MS - 1000);
    expect(await status()).toBe('running');
    await pass(1000);
    expect(await status()).toBe('frozen');
  });

  it('API operations on a frozen sandbox thaw it first: timeout, snapshot, fork, pause, connect', async () => {
    const { node, orch, id, status, pass } = await idleNode();
    await pass(IDLE_MS);
    await orch.setTimeout(id, 600);
    expect(await status()).toBe('running');
    await pass(IDLE_MS);
    expect(await status()).toBe('frozen');
    // The fake driver refuses to capture a frozen sandbox: these pass only because it was thawed.
    await orch.snapshot(id);
    await pass(IDLE_MS);
    const [child] = await orch.fork(id, 1, 60);
    expect(child).toBeDefined();
    await pass(IDLE_MS);
    expect(await status()).toBe('frozen');
    await orch.pause(id);
    expect(orch.get(id).state).toBe('paused');
    await orch.connect(id, 60);
    expect(orch.get(id).state).toBe('running');
    expect(await node.driver.status(orch.get(id).handle!)).toBe('running');
  });

  it('a kill of a frozen sandbox needs no thaw', async () => {
    const { node, orch, id, pass } = await idleNode();
    await pass(IDLE_MS);
    await orch.kill(id);
    expect(orch.find(id)).toBeUndefined();
    expect(node.driver.running()).toEqual([]);
    expect(node.driver.faults.calls('thaw')).toBe(0);
  });

  it('a request during a freeze waits for it and finds the sandbox running', async () => {
    const { node, orch, id, status, pass } = await idleNode();
    const held = node.driver.faults.hold('freeze');
    await pass(IDLE_MS - SWEEP_MS);
    node.clock.advance(SWEEP_MS);
    await held.reached;
    const woken = orch.wake(id);
    held.release();
    await woken;
    expect(await status()).toBe('running');
    await orch.backgroundIdle();
    expect(await status()).toBe('running');
  });

  it('sampling a frozen sandbox neither wakes it nor asks its envd: its last figures, no CPU', async () => {
    const { orch, id, status, pass } = await idleNode();
    const awake = await orch.usage(id);
    expect(awake).toBeDefined();
    await pass(IDLE_MS);
    const frozen = await orch.usage(id);
    expect(frozen).toEqual({ ...awake, cpuUsedPct: 0, ts: frozen!.ts });
    expect(frozen!.ts).toBeGreaterThan(awake!.ts);
    expect(await status()).toBe('frozen');
  });

  it('a failed freeze leaves the sandbox running; the next sweep tries again', async () => {
    const { node, status, pass } = await idleNode();
    node.driver.faults.failNext('freeze');
    await pass(IDLE_MS);
    expect(await status()).toBe('running');
    await pass(1000);
    expect(await status()).toBe('frozen');
  });

  it('idle_freeze_secs is 10 unless the config or AENV_IDLE_FREEZE_SECS says otherwise', () => {
    expect(defaults({}).orchestrator.idleFreezeSecs).toBe(10);
    expect(envOverrides({ AENV_IDLE_FREEZE_SECS: '0' })).toEqual({ orchestrator: { idleFreezeSecs: 0 } });
  });

  it('follows idle_freeze_secs; 0 turns freezing off', async () => {
    const short = await idleNode({ idleFreezeSecs: 2 });
    await short.pass(2000);
    expect(await short.status()).toBe('frozen');
    const off = await idleNode({ idleFreezeSecs: 0 });
    await off.pass(IDLE_MS * 100);
    expect(await off.status()).toBe('running');
    expect(off.node.driver.faults.calls('freeze')).toBe(0);
  });
});

describe('orchestrator: a job running in an idle sandbox keeps it awake', () => {
  /** The sandbox gets `pct` % of a core for `ms`; `wantedPct` % when a loaded host starves it. */
  async function burn(n: Awaited<ReturnType<typeof idleNode>>, pct: number, ms: number, wantedPct = pct) {
    const handle = n.orch.get(n.id).handle!;
    for (let left = ms; left > 0; left -= SWEEP_MS) {
      n.node.driver.starveCpu(handle, (SWEEP_MS * 1e6 * wantedPct) / 100, (SWEEP_MS * 1e6 * pct) / 100);
      await n.pass(SWEEP_MS);
    }
  }

  it('a sandbox busier than idle_freeze_cpu_pct (15 % of a core) without requests is not frozen', async () => {
    const n = await idleNode();
    await burn(n, 25, IDLE_MS * 6);
    expect(await n.status()).toBe('running');
    expect(n.node.driver.faults.calls('freeze')).toBe(0);
  });

  it("reads a busy job's threads (a file per host thread) only when its CPU says quiet", async () => {
    const n = await idleNode();
    await burn(n, 25, IDLE_MS);
    const before = n.node.driver.threadReads;
    await burn(n, 25, IDLE_MS * 3);
    expect(n.node.driver.threadReads).toBe(before);
    await burn(n, 3, 2000);
    expect(await n.status()).toBe('frozen');
  });

  it('a job the loaded host starves (5 % of a core got, a whole core wanted) keeps its sandbox awake', async () => {
    const n = await idleNode();
    await burn(n, 5, IDLE_MS * 6, 100);
    expect(await n.status()).toBe('running');
    expect(n.node.driver.faults.calls('freeze')).toBe(0);
    await burn(n, 3, 2000);
    expect(await n.status()).toBe('frozen');
  });

  it('once its job ends, it is frozen within a window of quiet', async () => {
    const n = await idleNode();
    await burn(n, 25, IDLE_MS * 2);
    expect(await n.status()).toBe('running');
    await burn(n, 3, 2000);
    expect(await n.status()).toBe('frozen');
  });

  it('quiet by CPU is not enough: a request keeps it awake for idle_freeze_secs again', async () => {
    const n = await idleNode();
    await n.pass(IDLE_MS - SWEEP_MS);
    n.orch.activity.touch(n.id);
    await n.pass(IDLE_MS - SWEEP_MS);
    expect(await n.status()).toBe('running');
    await n.pass(SWEEP_MS);
    expect(await n.status()).toBe('frozen');
  });

  it('a pause on timeout asked while a snapshot holds the sandbox and its CPU is read finds it awake', async () => {
    const n = await idleNode();
    const faults = n.node.driver.faults;
    await n.pass(IDLE_MS - SWEEP_MS);
    const snapshotting = faults.hold('checkpoint');
    const snapshot = n.orch.snapshot(n.id);
    await snapshotting.reached;
    // Its idle time runs out under the snapshot; the sweep's CPU read is held on the way.
    await n.pass(IDLE_MS - SWEEP_MS);
    const reading = faults.hold('cpuUse');
    n.node.clock.advance(SWEEP_MS);
    const paused = n.orch.pause(n.id, 'timeout');
    reading.release();
    snapshotting.release();
    await snapshot;
    await paused;
    expect(n.orch.get(n.id).state).toBe('paused');
    expect(faults.calls('thaw')).toBe(faults.calls('freeze'));
  });

  it('a driver that cannot tell the CPU leaves the decision to requests', async () => {
    const n = await idleNode();
    n.node.driver.faults.failAlways('cpuUse');
    await n.pass(IDLE_MS);
    expect(await n.status()).toBe('frozen');
  });

  it('with idle_freeze_cpu_pct 0, requests alone decide', async () => {
    const n = await idleNode({ idleFreezeCpuPct: 0 });
    await burn(n, 100, IDLE_MS);
    expect(await n.status()).toBe('frozen');
  });

  it('idle_freeze_cpu_pct is 15 unless the config or AENV_IDLE_FREEZE_CPU_PCT says otherwise', () => {
    expect(defaults({}).orchestrator.idleFreezeCpuPct).toBe(15);
    expect(envOverrides({ AENV_IDLE_FREEZE_CPU_PCT: '0' })).toEqual({
      orchestrator: { idleFreezeCpuPct: 0 },
    });
  });

  it('a stretch without traffic has one start, whenever it is looked at; none while a request is open', () => {
    const clock = new FakeClock();
    const activity = new ActivityTracker(clock);
    activity.touch('a');
    const start = clock.now();
    clock.advance(1500);
    expect(activity.quietSince('a')).toBe(start);
    clock.advance(700);
    expect(activity.quietSince('a')).toBe(start);
    const end = activity.begin('a');
    expect(activity.quietSince('a')).toBeUndefined();
    clock.advance(100);
    end();
    expect(activity.quietSince('a')).toBe(clock.now());
    expect(activity.quietSince('unknown')).toBeUndefined();
  });

  it('busierThan: CPU time over wall time against a share of one core, or a thread runnable nearly all along', () => {
    const use = (cpuNs: number, threads: [number, number][] = []) => ({
      cpuNs,
      runnableNs: new Map(threads),
    });
    const from = {
      idleSince: 0,
      at: 1000,
      use: use(5e9, [
        [7, 1e9],
        [8, 0],
      ]),
    };
    expect(busierThan(10, from, 3000, use(5e9 + 0.2e9))).toBe(false);
    expect(busierThan(10, from, 3000, use(5e9 + 0.21e9))).toBe(true);
    expect(busierThan(150, from, 3000, use(5e9 + 3.1e9))).toBe(true);
    expect(busierThan(10, from, 1000, use(9e9))).toBe(false);
    // Thread 7 runnable 1.8 of 2 s (it got 0.1 s of CPU): starved, busy. 1.7 s: at rest.
    expect(busierThan(10, from, 3000, use(5e9 + 0.1e9, [[7, 2.8e9]]))).toBe(true);
    expect(
      busierThan(
        10,
        from,
        3000,
        use(5e9 + 0.1e9, [
          [7, 2.7e9],
          [8, 1.7e9],
        ]),
      ),
    ).toBe(false);
    // A thread not in the first reading started within the window: its whole past is not in it.
    expect(busierThan(10, from, 3000, use(5e9, [[9, 5e9]]))).toBe(false);
  });
});

describe('orchestrator: kill answers before the reclaim', () => {
  it('the sandbox is gone at once; capacity counts it until the driver released it', async () => {
    const { node, orch, id, rec } = await FakeNode.withRunning({ maxSandboxes: 1 });
    const releasing = vi.spyOn(node.driver, 'releasing');
    releasing.mockReturnValue([{ id: rec.handle!.id, resources: rec.handle!.resources, since: 0 }]);
    await orch.kill(id);
    expect(orch.find(id)).toBeUndefined();
    expect(orch.target(id)).toBeUndefined();
    expect(errorBody(await rejection(node.create())).status).toBe(429);
    releasing.mockReturnValue([]);
    await node.create();
    await orch.backgroundIdle();
    expect(node.slots.used).toBe(1);
  });

  it('the slot and local captures are given back in the background', async () => {
    const { node, orch, id } = await FakeNode.withRunning();
    const held = node.slots.faults.hold('release');
    await orch.kill(id);
    expect(orch.find(id)).toBeUndefined();
    await held.reached;
    expect(node.slots.used).toBe(1);
    held.release();
    await orch.backgroundIdle(id);
    expect(node.slots.used).toBe(0);
  });
});
