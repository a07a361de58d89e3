import { describe, expect, it } from 'vitest';
import { EventLog } from '../../src/events.js';
import { nodeStatus, Watch } from '../../src/membership/health.js';
import { FailureDetector } from '../../src/membership/failures.js';
import { Membership } from '../../src/membership/membership.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { heartbeat, ManualClock, nodeRecord, running, schedulerParts, settings } from './helpers.js';

const setup = schedulerParts;

describe('node health', () => {
  it('is unhealthy after three missed intervals, not before', () => {
    const n = nodeRecord('a', { lastHeartbeatMs: 0 });
    expect(nodeStatus(n, undefined, 6000, 2000)).toBe('ready');
    expect(nodeStatus(n, undefined, 6001, 2000)).toBe('unhealthy');
    expect(nodeStatus({ ...n, lastHeartbeatMs: undefined }, undefined, 0, 2000)).toBe('connecting');
  });

  it('a drain holds for the boot it was made for; silence beats draining', () => {
    const n = nodeRecord('a', { lastHeartbeatMs: 0, bootId: 'b1' });
    expect(nodeStatus(n, 'b1', 0, 2000)).toBe('draining');
    expect(nodeStatus({ ...n, bootId: 'b2' }, 'b1', 0, 2000)).toBe('ready');
    expect(nodeStatus({ ...n, reported: 'draining' }, undefined, 0, 2000)).toBe('draining');
    expect(nodeStatus(n, 'b1', 10_000, 2000)).toBe('unhealthy');
  });
});

describe('membership', () => {
  it("reads a node's roster whole when another replica heard the node since this one did", async () => {
    const clock = new ManualClock();
    // Shared, as Redis is between replicas: each reloads what the other wrote within a quarter interval.
    const store: { shared: boolean } & MemoryStore = new MemoryStore(clock);
    store.shared = true;
    const s = settings();
    const [one, two] = [new Membership(store, clock, s), new Membership(store, clock, s)];
    const bound = async () => (await store.getBindings(['r1'])).get('r1')?.state;
    await one.heartbeat(heartbeat('a', { roster: [running('r1')] }));
    // The node moves to the other replica (the first did not answer), pauses r1 and comes back.
    clock.advance(1000);
    await two.heartbeat(heartbeat('a', { roster: [running('r1', { state: 'paused', pauseId: 'p' })] }));
    expect(await bound()).toBe('paused');
    clock.advance(1000);
    await one.heartbeat(heartbeat('a', { roster: [running('r1')] }));
    // Resumed: the roster is what the first replica saw last, but not what is stored now.
    expect(await bound()).toBe('running');
  });

  it('a first heartbeat registers the node and its roster becomes bindings', async () => {
    const { membership, placements } = setup();
    await membership.heartbeat(
      heartbeat('a', { roster: [running('s1'), running('s2', { state: 'paused', pauseId: 'p2' })] }),
    );
    expect((await membership.views()).map((v) => [v.node.nodeId, v.status])).toEqual([['a', 'ready']]);
    await expect(placements.lookup('s2')).resolves.toMatchObject({
      nodeId: 'a',
      binding: { state: 'paused', pauseId: 'p2' },
    });
  });

  it('refuses malformed heartbeats with the field named', async () => {
    const { membership } = setup();
    await expect(membership.heartbeat(heartbeat('bad id!'))).rejects.toMatchObject({
      kind: 'invalid',
      message: /node_id/,
    });
    await expect(membership.heartbeat(heartbeat('a', { advertiseUrl: 'ftp://x' }))).rejects.toMatchObject({
      message: /advertise_url/,
    });
    const cap = { ...heartbeat('a').capacity, maxSandboxes: 0 };
    await expect(membership.heartbeat(heartbeat('a', { capacity: cap }))).rejects.toMatchObject({
      message: /capacity/,
    });
  });

  it('with a static list, only expected nodes join and the others are listed as connecting', async () => {
    const { membership } = setup(
      settings({ expectedNodes: [{ nodeId: 'a' }, { nodeId: 'b', advertiseUrl: 'http://b:8000' }] }),
    );
    await expect(membership.heartbeat(heartbeat('x'))).rejects.toMatchObject({ kind: 'unauthorized' });
    await membership.heartbeat(heartbeat('a'));
    const views = await membership.views();
    expect(views.map((v) => [v.node.nodeId, v.status, v.expected])).toEqual([
      ['a', 'ready', true],
      ['b', 'connecting', true],
    ]);
    expect(views[1]!.node.advertiseUrl).toBe('http://b:8000');
  });

  it('a drained node gets no placements until it restarts with a new boot id', async () => {
    const { membership, placements } = setup();
    await membership.heartbeat(heartbeat('a'));
    await membership.unregister('a');
    await expect(membership.heartbeat(heartbeat('a'))).resolves.toEqual({ status: 'draining', fenced: [] });
    await expect(
      placements.schedule({ kind: 'create', cacheKeys: [], excludeNodeIds: [], count: 1 }),
    ).rejects.toMatchObject({
      kind: 'unavailable',
    });
    await expect(membership.heartbeat(heartbeat('a', { bootId: 'boot-2' }))).resolves.toEqual({
      status: 'ready',
      fenced: [],
    });
    await expect(membership.unregister('nope')).rejects.toMatchObject({ kind: 'not_found' });
  });

  it('a sandbox gone from the roster is unbound; a fresh assignment survives one early roster', async () => {
    const s = settings();
    const { membership, placements, clock } = setup(s);
    await membership.heartbeat(heartbeat('a', { roster: [running('s1')] }));
    await placements.recordAssignment({ nodeId: 'a', sandboxIds: ['s2'] });
    await membership.heartbeat(heartbeat('a', { roster: [] }));
    await expect(placements.lookup('s1')).rejects.toMatchObject({ kind: 'not_found' });
    await expect(placements.lookup('s2')).resolves.toMatchObject({ nodeId: 'a' });
    clock.advance(2 * s.heartbeatIntervalMs);
    await membership.heartbeat(heartbeat('a', { roster: [] }));
    await expect(placements.lookup('s2')).rejects.toMatchObject({ kind: 'not_found' });
  });

  it('bindings expire without refresh and are refreshed by rosters', async () => {
    const s = settings({ bindingTtlMs: 9000 });
    const { membership, placements, clock } = setup(s);
    await membership.heartbeat(heartbeat('a', { roster: [running('s1')] }));
    for (let i = 0; i < 10; i++) {
      clock.advance(2000);
      await membership.heartbeat(heartbeat('a', { roster: [running('s1')] }));
    }
    await expect(placements.lookup('s1')).resolves.toMatchObject({ nodeId: 'a' });
    await placements.recordAssignment({ nodeId: 'a', sandboxIds: ['s2'] });
    clock.advance(9001);
    await expect(placements.lookup('s2')).rejects.toMatchObject({ kind: 'not_found' });
  });
});

describe('node failure', () => {
  it('running sandboxes of a silent node become lost with a node-failure event, once; paused ones stay', async () => {
    const s = settings();
    const { membership, placements, failures, events, clock } = setup(s);
    await membership.heartbeat(
      heartbeat('a', { roster: [running('r1'), running('p1', { state: 'paused', pauseId: 'pp' })] }),
    );
    await membership.heartbeat(heartbeat('b'));
    clock.advance(3 * s.heartbeatIntervalMs);
    await membership.heartbeat(heartbeat('b'));
    expect(await failures.sweep()).toEqual([]);
    clock.advance(1);
    await membership.heartbeat(heartbeat('b'));
    expect(await failures.sweep()).toEqual([{ nodeId: 'a', lost: ['r1'], paused: ['p1'] }]);
    expect(await failures.sweep()).toEqual([]);

    await expect(placements.lookup('r1')).resolves.toMatchObject({
      nodeStatus: 'unhealthy',
      binding: {
        state: 'lost',
        lostReason: expect.stringMatching(/^node failure: node a stopped heartbeating/),
      },
    });
    const list = await events.list('r1');
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ type: 'lost', nodeId: 'a', details: { previous_state: 'running' } });
    expect(list[0]!.reason).toMatch(/node failure/);
    expect(await events.list('p1')).toEqual([]);
    await expect(placements.lookup('p1')).resolves.toMatchObject({
      nodeStatus: 'unhealthy',
      binding: { state: 'paused' },
    });

    // No placements on it; resumes of its paused sandbox go elsewhere.
    const p = await placements.schedule({
      kind: 'resume',
      sandboxId: 'p1',
      cacheKeys: [],
      excludeNodeIds: [],
      count: 1,
    });
    expect(p.nodeId).toBe('b');
  });

  it('a lost sandbox stays lost when its node comes back without it', async () => {
    const s = settings();
    const { membership, placements, failures, clock } = setup(s);
    await membership.heartbeat(heartbeat('a', { roster: [running('r1')] }));
    clock.advance(10_000);
    await failures.sweep();
    await membership.heartbeat(heartbeat('a', { bootId: 'boot-2', roster: [] }));
    await expect(placements.lookup('r1')).resolves.toMatchObject({
      nodeStatus: 'ready',
      binding: { state: 'lost' },
    });
  });

  it('counts no silence from before its own watch began (a restart on a shared store, a stall)', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore(clock);
    const s = settings();
    await new Membership(store, clock, s).heartbeat(heartbeat('a', { roster: [running('r1')] }));
    // This scheduler starts 10 s after the node's last heartbeat (another one heard it).
    clock.advance(10_000);
    const watch = new Watch(clock, s.heartbeatIntervalMs);
    const membership = new Membership(store, clock, s, watch);
    const failures = new FailureDetector(store, clock, s, membership, new EventLog(store, clock));
    const status = async () => (await membership.views()).map((v) => v.status);
    expect(await status()).toEqual(['ready']);
    expect(await failures.sweep()).toEqual([]);
    // Watching, ticking every half second: silent for three intervals of its own watch → unhealthy.
    for (let t = 0; t < 6000; t += 500) {
      clock.advance(500);
      watch.tick();
    }
    expect(await status()).toEqual(['ready']);
    clock.advance(500);
    watch.tick();
    expect(await status()).toEqual(['unhealthy']);
    // A stall of this process (no tick for 8 s) starts the watch again: the node's heartbeats
    // waited unread in its sockets, they were not missing. The first judgement after the stall
    // sees it, before any timer ticks.
    await membership.heartbeat(heartbeat('a', { roster: [running('r1')] }));
    clock.advance(8000);
    expect(await status()).toEqual(['ready']);
    expect(await failures.sweep()).toEqual([]);
  });

  it('leaves out of a silence the short stalls of its own that add up over three intervals', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore(clock);
    const s = settings();
    const watch = new Watch(clock, s.heartbeatIntervalMs);
    const membership = new Membership(store, clock, s, watch);
    const status = async () => (await membership.views()).map((v) => v.status);
    await membership.heartbeat(heartbeat('a'));
    // A starved scheduler: its 500 ms ticks come 1.5 s apart, each stall too short to start the
    // watch again. 12 s pass, 8 s of them stalled: the node was silent for 4 s of its watch.
    for (let t = 0; t < 12_000; t += 1500) {
      clock.advance(1500);
      watch.tick();
    }
    expect(await status()).toEqual(['ready']);
    // Running freely again: two more seconds of silence make three intervals.
    for (let t = 0; t < 2000; t += 500) {
      clock.advance(500);
      watch.tick();
    }
    expect(await status()).toEqual(['ready']);
    clock.advance(500);
    watch.tick();
    expect(await status()).toEqual(['unhealthy']);
  });

  it('a heartbeat is as fresh as its write, however slow the store', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore(clock);
    const putBindings = store.putBindings.bind(store);
    // Each binding write takes 7 s: longer than three intervals.
    store.putBindings = async (b, ttl) => {
      clock.advance(7000);
      return putBindings(b, ttl);
    };
    const membership = new Membership(store, clock, settings());
    await expect(membership.heartbeat(heartbeat('a', { roster: [running('r1')] }))).resolves.toEqual({
      status: 'ready',
      fenced: [],
    });
    expect((await membership.views()).map((v) => v.status)).toEqual(['ready']);
  });

  it('a heartbeat counts from its arrival while it waits for the store', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore(clock);
    const membership = new Membership(store, clock, settings());
    await membership.heartbeat(heartbeat('a'));
    const putNode = store.putNode.bind(store);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    store.putNode = async (n, roster, ttlMs) => {
      await held;
      return putNode(n, roster, ttlMs);
    };
    // Heartbeats arrive every interval but none is written for 7 s: the node is alive all along.
    const beats = [];
    for (let t = 0; t < 7000; t += 2000) {
      clock.advance(2000);
      beats.push(membership.heartbeat(heartbeat('a')));
      expect((await membership.views()).map((v) => v.status)).toEqual(['ready']);
    }
    release();
    await Promise.all(beats);
    // Silent from its last arrival on: unhealthy after three intervals as always.
    clock.advance(6001);
    expect((await membership.views()).map((v) => v.status)).toEqual(['unhealthy']);
  });

  it('applies only the newest of the heartbeats of a node waiting behind a slow one', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore(clock);
    const membership = new Membership(store, clock, settings());
    const putNode = store.putNode.bind(store);
    const written: number[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let writing!: () => void;
    const underWay = new Promise<void>((r) => (writing = r));
    store.putNode = async (n, roster, ttlMs) => {
      writing();
      await held;
      written.push(n.load.runningCount);
      return putNode(n, roster, ttlMs);
    };
    const report = (n: number) => heartbeat('a', { load: { ...heartbeat('a').load, runningCount: n } });
    const beats = [membership.heartbeat(report(1))];
    await underWay;
    beats.push(...[2, 3, 4, 5].map((n) => membership.heartbeat(report(n))));
    release();
    expect(await Promise.all(beats)).toEqual(Array(5).fill({ status: 'ready', fenced: [] }));
    // The first was under way; 2-4 were superseded by 5 before their turn.
    expect(written).toEqual([1, 5]);
    expect((await membership.views())[0]!.node.load.runningCount).toBe(5);
  });
});
