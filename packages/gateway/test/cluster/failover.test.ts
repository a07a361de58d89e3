import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRepository } from '@agentenv/snapshot';
import { eventually } from '@agentenv/test-support';
import {
  TEST_CLUSTER_KEY as API_KEY,
  TEST_CLUSTER_STORE as SNAPSHOT_STORE,
  TestCluster,
} from '@agentenv/test-support/cluster';
import { useGateway } from './sdk-env.js';

/** Whether the shared repository holds a pause of the sandbox. */
async function inRepository(sandboxId: string): Promise<boolean> {
  const repo = createRepository({ backend: 'posix_fs', path: SNAPSHOT_STORE });
  await repo.open();
  return (await repo.listRecords({ labels: { sandboxId, kind: 'pause' } }, { limit: 1 })).records.length > 0;
}

/** A pause answers before its upload: once this resolves, the shared repository holds it. */
async function pauseStored(sandboxId: string): Promise<void> {
  await eventually(
    async () =>
      expect(await inRepository(sandboxId), `the pause of ${sandboxId} in the shared repository`).toBe(true),
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

/** Two sandboxes sharing a node (paused, running) and one elsewhere, among a few creates. */
async function sandboxesOnOneNode(c: TestCluster) {
  const made = await Promise.all(Array.from({ length: 4 }, () => Sandbox.create({ timeoutMs: 600_000 })));
  const where = await c.placementOf();
  const byNode = new Map<number, Sandbox[]>();
  for (const s of made)
    byNode.set(where.get(s.sandboxId)!, [...(byNode.get(where.get(s.sandboxId)!) ?? []), s]);
  const [x, pair] = [...byNode].find(([, list]) => list.length >= 2)!;
  const other = made.find((s) => where.get(s.sandboxId) !== x)!;
  return { x, paused: pair[0]!, running: pair[1]!, other };
}

describe('node loss and scheduler restarts (Redis store)', () => {
  let c: TestCluster;

  beforeAll(async () => {
    c = await TestCluster.start({ nodes: 3, store: 'redis' });
    useGateway(c.gatewayUrl);
  });

  afterAll(async () => {
    // The killed node comes back once so it reclaims what its crash left (processes, namespaces).
    for (let i = 0; i < 3; i++) if (!c?.nodes[i] && c?.scheduler) await c.startNode(i).catch(() => undefined);
    await c?.stop();
  });

  it('resumes a paused sandbox of a SIGKILLed node elsewhere, memory and files intact; its running one is lost', async () => {
    const { x, paused, running, other } = await sandboxesOnOneNode(c);
    await paused.files.write('/home/user/keep.txt', 'kept across nodes');
    await paused.commands.run('sleep 3600', { background: true });
    const pid = (await paused.commands.run('pgrep -x sleep')).stdout.trim();
    expect(pid).toMatch(/^\d+$/);
    await paused.pause();
    // Another node can take it over only from the shared repository, once the cluster knows the
    // pause is there: from a heartbeat of its node built after the upload (one interval later).
    await pauseStored(paused.sandboxId);
    const storedAt = Date.now();
    await eventually(
      async () =>
        expect(
          Date.parse(String((await c.api('GET', `/nodes/${TestCluster.nodeId(x)}`)).json.lastHeartbeat)),
          `a heartbeat of node ${x} after the pause was stored`,
        ).toBeGreaterThan(storedAt + 2_000),
      { timeoutMs: 30_000, intervalMs: 250 },
    );

    // The cluster's event stream, read as a client would, from before the failure.
    const stream = await fetch(`${c.gatewayUrl}/events`, { headers: { 'x-api-key': API_KEY } });
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    let streamed = '';
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
    void (async () => {
      for (let r = await reader.read(); !r.done; r = await reader.read()) streamed += r.value;
    })().catch(() => undefined);

    await c.stopNode(x, 'SIGKILL');
    // Its sandboxes answer 502 at once; the others are untouched.
    const down = await c.api('GET', `/sandboxes/${running.sandboxId}`);
    expect(down.status).toBe(502);
    expect(down.json).toMatchObject({ code: 502, message: expect.stringContaining('unreachable') });
    expect((await c.api('GET', `/sandboxes/${other.sandboxId}`)).status).toBe(200);

    const resumed = await Sandbox.connect(paused.sandboxId);
    const where = await c.placementOf();
    expect(where.get(paused.sandboxId)).toBeDefined();
    expect(where.get(paused.sandboxId)).not.toBe(x);
    expect(await resumed.files.read('/home/user/keep.txt')).toBe('kept across nodes');
    expect((await resumed.commands.run('pgrep -x sleep')).stdout.trim()).toBe(pid);

    const lost = await eventually(
      async () => {
        const r = await c.api('GET', `/sandboxes/${running.sandboxId}/events`);
        const events = r.json as unknown as { type: string; reason?: string }[];
        const found = Array.isArray(events) ? events.find((e) => e.type === 'lost') : undefined;
        expect(found, `a lost event for ${running.sandboxId}`).toBeDefined();
        return found!;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(lost.reason).toMatch(/node failure/);
    await eventually(
      () => {
        expect(streamed).toContain('event: lost');
        expect(streamed).toContain(running.sandboxId);
      },
      { timeoutMs: 30_000 },
    );
    await reader.cancel();
    const info = await c.api('GET', `/sandboxes/${running.sandboxId}`);
    expect(info.json).toMatchObject({ state: 'lost', reason: expect.stringMatching(/node failure/) });
    expect((await c.api('POST', `/sandboxes/${running.sandboxId}/connect`, {})).status).toBe(410);
    await resumed.kill();
    await other.kill();
  });

  it('answers 503 while the scheduler is down; with Redis sandboxes are routable again within 5 s of its restart', async () => {
    const sbx = await Sandbox.create();
    await c.stopScheduler('SIGKILL');
    const create = await c.api('POST', '/sandboxes', {});
    expect(create.status).toBe(503);
    expect(create.json).toMatchObject({ code: 503, message: expect.stringContaining('scheduler') });
    expect((await c.api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(503);
    await c.startScheduler();
    const t0 = Date.now();
    await eventually(
      async () => expect((await c.api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(200),
      {
        timeoutMs: 5_000,
        intervalMs: 50,
      },
    );
    console.log(`Redis store: routable ${Date.now() - t0} ms after the scheduler answered again`);
    expect((await sbx.commands.run('echo back')).stdout).toBe('back\n');
    await sbx.kill();
  });

  it('a node SIGKILLed right after a pause answered loses nothing: 503 until it is back, then it resumes anywhere', async () => {
    const sbx = await Sandbox.create({ timeoutMs: 600_000 });
    await sbx.files.write('/home/user/keep.txt', 'kept through a crash');
    await sbx.commands.run('sleep 3600', { background: true });
    const pid = (await sbx.commands.run('pgrep -x sleep')).stdout.trim();
    const y = (await c.placementOf()).get(sbx.sandboxId)!;
    await sbx.pause();
    await c.stopNode(y, 'SIGKILL');

    // The upload (chunking, hashing, writing a memory image) takes far longer than a SIGKILL;
    // should it have won, the sandbox is simply resumable elsewhere already.
    const raced = await inRepository(sbx.sandboxId);
    console.log(`pause ${raced ? 'already stored' : 'not yet stored'} when its node was SIGKILLed`);
    if (!raced) {
      const connect = await c.api('POST', `/sandboxes/${sbx.sandboxId}/connect`, {});
      expect(connect.status).toBe(503);
      expect(Number(connect.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(connect.json.message).toContain(`stored only on node ${TestCluster.nodeId(y)}`);
      const info = await c.api('GET', `/sandboxes/${sbx.sandboxId}`);
      expect(info.json).toMatchObject({ state: 'paused', pauseStored: false });
      // Still so once the scheduler judged the node unhealthy.
      await eventually(
        async () =>
          expect((await c.api('GET', `/nodes/${TestCluster.nodeId(y)}`)).json.status, `node ${y}`).toBe(
            'unhealthy',
          ),
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      expect((await c.api('POST', `/sandboxes/${sbx.sandboxId}/connect`, {})).status).toBe(503);
    }

    // Back: the node finishes the upload, and says so in its heartbeats.
    await c.startNode(y);
    await eventually(
      async () =>
        expect((await c.api('GET', `/sandboxes/${sbx.sandboxId}`)).json.pauseStored, 'pause stored').toBe(
          true,
        ),
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const storedAt = Date.now();
    await eventually(
      async () =>
        expect(
          Date.parse(String((await c.api('GET', `/nodes/${TestCluster.nodeId(y)}`)).json.lastHeartbeat)),
          `a heartbeat of node ${y} after the pause was stored`,
        ).toBeGreaterThan(storedAt + 2_000),
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    // Anywhere: its node is gone again, another one resumes it from the shared repository.
    await c.stopNode(y, 'SIGKILL');
    const resumed = await Sandbox.connect(sbx.sandboxId);
    expect((await c.placementOf()).get(sbx.sandboxId)).not.toBe(y);
    expect(await resumed.files.read('/home/user/keep.txt')).toBe('kept through a crash');
    expect((await resumed.commands.run('pgrep -x sleep')).stdout.trim()).toBe(pid);
    await resumed.kill();
  });
});

describe('scheduler restart with the memory store', () => {
  let c: TestCluster;
  const HEARTBEAT_MS = 2_000;

  beforeAll(async () => {
    c = await TestCluster.start({ nodes: 2, store: 'memory' });
    useGateway(c.gatewayUrl);
  });

  afterAll(async () => {
    await c?.stop();
  });

  it('has sandboxes routable again within one heartbeat, from the nodes rosters', async () => {
    const sbx = await Sandbox.create();
    await c.stopScheduler('SIGKILL');
    await c.startScheduler();
    const t0 = Date.now();
    // One heartbeat interval, plus a second for the heartbeat itself on a loaded machine.
    await eventually(
      async () => expect((await c.api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(200),
      {
        timeoutMs: HEARTBEAT_MS + 1_000,
        intervalMs: 50,
      },
    );
    console.log(`memory store: routable ${Date.now() - t0} ms after the scheduler answered again`);
    expect((await sbx.commands.run('echo back')).stdout).toBe('back\n');
    await sbx.kill();
  });
});
