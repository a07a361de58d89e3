import { request, type OutgoingHttpHeaders } from 'node:http';
import { Code, ConnectError } from '@connectrpc/connect';
import { NodeStatus, PlacementKind, SandboxEventType, SandboxState } from '@agentenv/protocol/scheduler';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createSchedulerClient } from '../../src/client.js';
import { eventually } from '@agentenv/test-support';
import {
  CLUSTER_KEY,
  FakeNode,
  redisMissing,
  startRedis,
  startSchedulerProcess,
  type RedisProcess,
  type SchedulerProcess,
} from '@agentenv/test-support/cluster';

// Ports of helper range 192xx: redis 19201, schedulers 19210–19219.
const REDIS_PORT = 19201;
const PORTS = { a: 19210, b: 19211 };
const INTERVAL_MS = 300;

const client = (s: SchedulerProcess, protocol: 'connect' | 'grpc' = 'connect') =>
  createSchedulerClient({ url: s.url, apiKey: CLUSTER_KEY, protocol });

const started: { stop(): Promise<void> | void }[] = [];
afterEach(async () => {
  for (const s of started.splice(0).reverse()) await s.stop();
});

async function scheduler(
  port: number,
  store = 'memory',
  intervalMs = INTERVAL_MS,
): Promise<SchedulerProcess> {
  const s = await startSchedulerProcess({ port, store, heartbeatIntervalMs: intervalMs });
  started.push(s);
  return s;
}

async function nodes(s: SchedulerProcess, ids: string[]): Promise<FakeNode[]> {
  const out: FakeNode[] = [];
  for (const nodeId of ids) {
    const n = new FakeNode({ schedulerUrl: s.url, apiKey: CLUSTER_KEY, nodeId, intervalMs: INTERVAL_MS });
    await n.start();
    started.push(n);
    out.push(n);
  }
  return out;
}

/** ListNodes over Connect's JSON protocol with exactly these headers. */
function rawCall(port: number, headers: OutgoingHttpHeaders): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/scheduler.v1.SchedulerService/ListNodes',
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end('{}');
  });
}

async function codeOf(p: Promise<unknown>): Promise<Code | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

const running = (sandboxId: string) => ({
  sandboxId,
  state: SandboxState.RUNNING,
  templateId: 'base',
  cpuCount: 2,
  memoryMib: 1024,
});
const paused = (sandboxId: string, pauseId: string) => ({
  ...running(sandboxId),
  state: SandboxState.PAUSED,
  pauseId,
});

describe('membership and authentication', () => {
  it('nodes register with their first heartbeat, over Connect and gRPC, and list with their rosters', async () => {
    const s = await scheduler(PORTS.a);
    const [a] = await nodes(s, ['node-a', 'node-b']);
    a!.roster = [running('sbx-1')];
    await a!.beat();
    for (const protocol of ['connect', 'grpc'] as const) {
      const c = client(s, protocol);
      const list = await c.listNodes({});
      expect(list.nodes.map((n) => [n.ref?.nodeId, n.status])).toEqual([
        ['node-a', NodeStatus.READY],
        ['node-b', NodeStatus.READY],
      ]);
      const got = await c.getNode({ nodeId: 'node-a' });
      expect(got.node?.sandboxes.map((x) => x.sandboxId)).toEqual(['sbx-1']);
      expect((await c.lookupNode({ sandboxId: 'sbx-1' })).node?.nodeId).toBe('node-a');
    }
  });

  it('refuses calls without the cluster key, with a wrong one, or with the header twice', async () => {
    const s = await scheduler(PORTS.a);
    const hb = new FakeNode({
      schedulerUrl: s.url,
      apiKey: CLUSTER_KEY,
      nodeId: 'intruder',
      intervalMs: INTERVAL_MS,
    }).request();
    const wrong = createSchedulerClient({ url: s.url, apiKey: 'e2b_not-the-key' });
    expect(await codeOf(wrong.heartbeat(hb))).toBe(Code.Unauthenticated);
    expect(
      await codeOf(createSchedulerClient({ url: s.url, apiKey: 'e2b_x', protocol: 'grpc' }).schedule({})),
    ).toBe(Code.Unauthenticated);
    expect((await rawCall(s.port, {})).status).toBe(401);
    // Two header lines (fetch would join them into one).
    const twice = await rawCall(s.port, { 'x-api-key': [CLUSTER_KEY, CLUSTER_KEY] });
    expect(twice).toEqual({
      status: 401,
      body: { code: 'unauthenticated', message: 'X-API-Key given more than once' },
    });
    expect((await rawCall(s.port, { 'x-api-key': CLUSTER_KEY })).status).toBe(200);
    expect((await client(s).listNodes({})).nodes).toEqual([]);
    expect((await fetch(`${s.url}/health`)).status).toBe(204);
  });

  it('a malformed heartbeat is refused with the field named', async () => {
    const s = await scheduler(PORTS.a);
    const hb = new FakeNode({
      schedulerUrl: s.url,
      apiKey: CLUSTER_KEY,
      nodeId: 'n',
      intervalMs: INTERVAL_MS,
    }).request();
    const err = await client(s)
      .heartbeat({ ...hb, advertiseUrl: 'not a url' })
      .catch((e: unknown) => ConnectError.from(e));
    expect(err).toMatchObject({
      code: Code.InvalidArgument,
      rawMessage: expect.stringMatching(/advertise_url/),
    });
  });
});

describe.skipIf(redisMissing())('placement, failure and state with real processes', () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis(REDIS_PORT);
  });
  afterAll(async () => {
    await redis?.stop();
  });
  beforeEach(async () => {
    // Each test starts from an empty Redis (the previous test's processes are stopped by now).
    const r = await fetchRedis();
    await r.flushall();
    r.disconnect();
  });
  const fetchRedis = async () => new (await import('ioredis')).Redis(redis.url);

  for (const store of ['memory', 'redis'] as const) {
    it(`a burst of placements spreads evenly over idle nodes (${store} store)`, async () => {
      const s = await scheduler(PORTS.a, store === 'redis' ? redis.url : 'memory');
      const fleet = await nodes(s, ['n1', 'n2', 'n3']);
      const c = client(s);
      const placed = await Promise.all(
        Array.from({ length: 30 }, () => c.schedule({ kind: PlacementKind.CREATE })),
      );
      const per = new Map<string, number>();
      for (const p of placed) per.set(p.node!.nodeId, (per.get(p.node!.nodeId) ?? 0) + 1);
      expect(Object.fromEntries(per)).toEqual({ n1: 10, n2: 10, n3: 10 });
      const list = await c.listNodes({});
      expect(list.nodes.map((n) => n.reservedCount)).toEqual([10, 10, 10]);

      // 16 starts in flight per node: 18 more fit, then the cluster is full.
      const more = await Promise.allSettled(Array.from({ length: 20 }, () => c.schedule({})));
      const refused = more.filter((r) => r.status === 'rejected').map((r) => ConnectError.from(r.reason));
      expect(refused).toHaveLength(2);
      expect(refused[0]).toMatchObject({ code: Code.ResourceExhausted });
      expect(refused[0]!.metadata.get('retry-after')).toBe('1');

      // An assignment binds the sandbox; its room is free once the node's roster lists it.
      const first = placed[0]!.node!.nodeId;
      await c.recordAssignment({
        reservationId: placed[0]!.reservationId,
        nodeId: first,
        sandboxIds: ['sbx-x'],
      });
      expect((await c.lookupNode({ sandboxId: 'sbx-x' })).node?.nodeId).toBe(first);
      const node = fleet.find((n) => n.nodeId === first)!;
      node.roster = [running('sbx-x')];
      await node.beat();
      await expect(c.schedule({})).resolves.toMatchObject({ node: { nodeId: first } });

      // 30 + 18 + 1 placed; 48 still reserved (one was assigned).
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      expect(metrics).toMatch(
        /aenv_scheduler_placements_total\{kind="create",outcome="placed",locality="miss"\} 49/,
      );
      expect(metrics).toMatch(
        /aenv_scheduler_placements_total\{kind="create",outcome="capacity",locality="miss"\} 2/,
      );
      expect(metrics).toMatch(/aenv_scheduler_reservations_in_flight 48/);
      expect(metrics).toMatch(/aenv_scheduler_heartbeat_age_seconds\{node="n1"\}/);
    });

    it(`a snapshot recorded on a node draws its creates there before the node lists it (${store} store)`, async () => {
      // The default interval: an announcement stands for three of them, ample for the calls below.
      const s = await scheduler(PORTS.a, store === 'redis' ? redis.url : 'memory', 2000);
      const [, n2] = await nodes(s, ['n1', 'n2', 'n3']);
      const c = client(s);
      await c.recordCapture({ nodeId: 'n2', snapshotId: 'snapx', snapshotNames: ['named'] });
      // A heartbeat gathered before the snapshot lists no key of it, and changes nothing.
      await n2!.beat();
      for (const templateId of ['snapx', 'named', 'snapx'])
        await expect(c.schedule({ kind: PlacementKind.CREATE, templateId })).resolves.toMatchObject({
          node: { nodeId: 'n2' },
          localityHit: true,
        });
      await expect(c.recordCapture({ nodeId: 'nx', snapshotId: 'snapx' })).rejects.toMatchObject({
        code: Code.NotFound,
      });
    });
  }

  it('no node at all is unavailable, not capacity', async () => {
    const s = await scheduler(PORTS.a, redis.url);
    expect(await codeOf(client(s).schedule({}))).toBe(Code.Unavailable);
  });

  it('a silent node gets no placements; its running sandboxes become lost with a node-failure event (and stay so, fenced, when it comes back), its paused ones resume elsewhere', async () => {
    const s = await scheduler(PORTS.a, redis.url);
    const [, , dead] = await nodes(s, ['n1', 'n2', 'n3']);
    dead!.roster = [running('sbx-run'), paused('sbx-paused', 'pause-1')];
    await dead!.beat();
    const c = client(s);
    const watcher = createSchedulerClient({ url: s.url, apiKey: CLUSTER_KEY, timeoutMs: 0 });
    const ac = new AbortController();
    const streamed: string[] = [];
    const watching = (async () => {
      for await (const m of watcher.watchEvents({ nodeId: 'n3' }, { signal: ac.signal }))
        streamed.push(`${m.event?.sandboxId}:${SandboxEventType[m.event!.type]}:${m.event?.reason}`);
    })().catch(() => undefined);

    dead!.stop();
    await eventually(async () =>
      expect((await c.getNode({ nodeId: 'n3' })).node?.status).toBe(NodeStatus.UNHEALTHY),
    );
    for (let i = 0; i < 10; i++) {
      const p = await c.schedule({});
      expect(p.node?.nodeId).not.toBe('n3');
      await c.releaseReservation({ reservationId: p.reservationId });
    }
    await eventually(async () =>
      expect((await c.lookupNode({ sandboxId: 'sbx-run' })).sandbox?.state).toBe(SandboxState.LOST),
    );
    const events = await c.listSandboxEvents({ sandboxId: 'sbx-run' });
    expect(events.events).toHaveLength(1);
    expect(events.events[0]).toMatchObject({ type: SandboxEventType.LOST, nodeId: 'n3' });
    expect(events.events[0]!.reason).toMatch(/^node failure: node n3 stopped heartbeating/);
    await eventually(() => expect(streamed).toEqual([`sbx-run:LOST:${events.events[0]!.reason}`]));
    ac.abort();
    await watching;

    const p = await c.lookupNode({ sandboxId: 'sbx-paused' });
    expect(p).toMatchObject({
      nodeStatus: NodeStatus.UNHEALTHY,
      sandbox: { state: SandboxState.PAUSED, pauseId: 'pause-1' },
    });
    expect((await c.listSandboxEvents({ sandboxId: 'sbx-paused' })).events).toEqual([]);
    const resumed = await c.schedule({ kind: PlacementKind.RESUME, sandboxId: 'sbx-paused' });
    expect(['n1', 'n2']).toContain(resumed.node?.nodeId);

    // The node comes back (a long stall, not a restart) still running it: clients were told it
    // is lost, so it stays lost and the node is told to stop it.
    const back = await dead!.beat();
    expect(back.fencedSandboxIds).toEqual(['sbx-run']);
    expect((await c.lookupNode({ sandboxId: 'sbx-run' })).sandbox?.state).toBe(SandboxState.LOST);
    dead!.roster = [paused('sbx-paused', 'pause-1')];
    expect((await dead!.beat()).fencedSandboxIds).toEqual([]);
    expect((await c.lookupNode({ sandboxId: 'sbx-run' })).sandbox?.state).toBe(SandboxState.LOST);
  });

  it('with Redis, a restarted scheduler routes existing sandboxes at once', async () => {
    const s = await scheduler(PORTS.a, redis.url);
    const [n1, n2] = await nodes(s, ['n1', 'n2']);
    n1!.roster = [running('sbx-roster')];
    await n1!.beat();
    await client(s).recordAssignment({ nodeId: 'n2', sandboxIds: ['sbx-assigned'] });
    n1!.stop();
    n2!.stop();
    await s.stop('SIGKILL');
    const again = await scheduler(PORTS.a, redis.url);
    // No heartbeat since the restart: what it answers comes from Redis.
    const c = client(again);
    expect((await c.lookupNode({ sandboxId: 'sbx-roster' })).node?.nodeId).toBe('n1');
    expect((await c.lookupNode({ sandboxId: 'sbx-assigned' })).node?.nodeId).toBe('n2');
    expect((await c.listNodes({})).nodes.map((n) => n.ref?.nodeId)).toEqual(['n1', 'n2']);
  });

  it('with Redis, every key expires, and a Redis that lost everything is rebuilt from the heartbeats, drain marks too', async () => {
    const s = await scheduler(PORTS.a, redis.url);
    const [n1, n2] = await nodes(s, ['n1', 'n2']);
    n1!.roster = [running('sbx-1')];
    n2!.roster = [paused('sbx-2', 'pause-2')];
    const c = client(s);
    await c.unregisterNode({ nodeId: 'n1' });
    // The drained node hears it in the answer to its next heartbeat and says so from then on.
    await eventually(() => expect(n1!.draining).toBe(true));
    await c.recordCapture({ nodeId: 'n2', snapshotId: 'snapx' });
    await c.recordAssignment({ nodeId: 'n2', sandboxIds: ['sbx-assigned'] });
    await c.schedule({});
    await c.reportSandboxEvent({
      events: [{ sandboxId: 'sbx-1', nodeId: 'n1', type: SandboxEventType.CREATED }],
    });
    await eventually(async () =>
      expect((await c.lookupNode({ sandboxId: 'sbx-2' })).sandbox?.state).toBe(SandboxState.PAUSED),
    );

    const r = await fetchRedis();
    try {
      const withoutTtl = async () => {
        const keys = await r.keys('*');
        const ttls = await Promise.all(keys.map(async (k) => [k, await r.pttl(k)] as const));
        return { keys, without: ttls.filter(([, ms]) => ms <= 0).map(([k]) => k) };
      };
      const before = await withoutTtl();
      expect(before.keys.length).toBeGreaterThanOrEqual(10);
      expect(before.without).toEqual([]);

      // Redis loses everything (a restart without persistence): the heartbeats bring it back.
      await r.flushall();
      await eventually(async () => {
        expect((await c.lookupNode({ sandboxId: 'sbx-1' })).node?.nodeId).toBe('n1');
        expect((await c.lookupNode({ sandboxId: 'sbx-2' })).sandbox).toMatchObject({
          state: SandboxState.PAUSED,
          pauseId: 'pause-2',
        });
        expect(await r.get('aenv:sched:drain:n1')).toBe(n1!.bootId);
      });
      expect((await c.listNodes({})).nodes.map((n) => [n.ref?.nodeId, n.status])).toEqual([
        ['n1', NodeStatus.DRAINING],
        ['n2', NodeStatus.READY],
      ]);
      for (let i = 0; i < 6; i++) {
        const p = await c.schedule({});
        expect(p.node?.nodeId).toBe('n2');
        await c.releaseReservation({ reservationId: p.reservationId });
      }
      expect((await withoutTtl()).without).toEqual([]);
    } finally {
      r.disconnect();
    }
  });

  it('with Redis, a Redis that came back empty answers "retry", not "not found", until the rosters are back', async () => {
    const s = await scheduler(PORTS.a, redis.url, 2000);
    const [n1] = await nodes(s, ['n1']);
    n1!.stop();
    n1!.roster = [running('sbx-r')];
    await n1!.beat();
    const c = client(s);
    expect((await c.lookupNode({ sandboxId: 'sbx-r' })).node?.nodeId).toBe('n1');
    await redis.stop();
    redis = await startRedis(REDIS_PORT);
    // Reconnected, the store holds nothing of n1 (an assignment recorded while it was down would
    // be missing the same way): the scheduler says it does not know yet, and to retry.
    await eventually(async () => {
      const err = await c.lookupNode({ sandboxId: 'sbx-r' }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code).toBe(Code.Unavailable);
      expect(err?.rawMessage).toMatch(/rosters are still arriving/);
    });
    await n1!.beat();
    expect((await c.lookupNode({ sandboxId: 'sbx-r' })).node?.nodeId).toBe('n1');
  });

  it('with the memory store, a restarted scheduler routes sandboxes again after one heartbeat', async () => {
    const s = await scheduler(PORTS.a);
    const [n1] = await nodes(s, ['n1']);
    n1!.stop();
    n1!.roster = [running('sbx-1')];
    await n1!.beat();
    await s.stop('SIGKILL');
    const again = await scheduler(PORTS.a);
    const c = client(again);
    expect(await codeOf(c.lookupNode({ sandboxId: 'sbx-1' }))).toBe(Code.NotFound);
    await n1!.beat();
    expect((await c.lookupNode({ sandboxId: 'sbx-1' })).node?.nodeId).toBe('n1');
  });

  it('two replicas on one Redis agree on nodes, reservations, bindings and events', async () => {
    const a = await scheduler(PORTS.a, redis.url);
    const b = await scheduler(PORTS.b, redis.url);
    // Nodes heartbeat to replica A only.
    await nodes(a, ['n1', 'n2']);
    const ca = client(a);
    const cb = client(b, 'grpc');
    expect((await cb.listNodes({})).nodes.map((n) => [n.ref?.nodeId, n.status])).toEqual([
      ['n1', NodeStatus.READY],
      ['n2', NodeStatus.READY],
    ]);
    // Alternating replicas still spread: each counts the other's reservations once its index is
    // a quarter interval old (node-index.ts), which a replica's next decision then reloads.
    const picks = [];
    for (let i = 0; i < 8; i++) {
      picks.push((await (i % 2 ? cb : ca).schedule({})).node!.nodeId);
      await new Promise((r) => setTimeout(r, INTERVAL_MS / 2));
    }
    expect(picks.filter((n) => n === 'n1')).toHaveLength(4);
    expect((await cb.listNodes({})).nodes.map((n) => n.reservedCount)).toEqual([4, 4]);

    await ca.recordAssignment({ nodeId: 'n2', sandboxIds: ['sbx-a'] });
    expect((await cb.lookupNode({ sandboxId: 'sbx-a' })).node?.nodeId).toBe('n2');

    const ac = new AbortController();
    const watcher = createSchedulerClient({ url: b.url, apiKey: CLUSTER_KEY, timeoutMs: 0 });
    const got: string[] = [];
    const stream = watcher.watchEvents({ sandboxId: 'sbx-a' }, { signal: ac.signal });
    const watching = (async () => {
      for await (const m of stream) {
        got.push(SandboxEventType[m.event!.type]);
        if (got.includes('PAUSED')) ac.abort();
      }
    })().catch(() => undefined);
    // The subscription is in place once an event reported after it arrives; report until then.
    await eventually(async () => {
      await ca.reportSandboxEvent({
        events: [{ sandboxId: 'sbx-a', nodeId: 'n2', type: SandboxEventType.CREATED }],
      });
      expect(got).not.toHaveLength(0);
    });
    await ca.reportSandboxEvent({
      events: [{ sandboxId: 'sbx-a', nodeId: 'n2', type: SandboxEventType.PAUSED, reason: 'ttl' }],
    });
    await watching;
    expect(got.at(-1)).toBe('PAUSED');
    expect(new Set(got)).toEqual(new Set(['CREATED', 'PAUSED']));
    const listed = await cb.listSandboxEvents({ sandboxId: 'sbx-a' });
    expect(listed.events.at(-1)).toMatchObject({ type: SandboxEventType.PAUSED, reason: 'ttl' });
  });
});
