import { spawnSync } from 'node:child_process';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { TEST_CLUSTER_KEY as API_KEY, TestCluster } from '@agentenv/test-support/cluster';

/** The SDK's connection to gateway `k`: a trainer spreading its calls over both replicas. */
const via = (c: TestCluster, k: number) => ({
  apiUrl: c.gatewayUrls[k]!,
  sandboxUrl: c.gatewayUrls[k]!,
  apiKey: API_KEY,
});

/** The scheduler's sandbox → node bindings in Redis. */
function bindingKeys(): string[] {
  const r = spawnSync('redis-cli', ['-p', '19902', '--scan', '--pattern', 'aenv:sched:b:*'], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`redis-cli: ${r.stderr}`);
  return r.stdout.split('\n').filter(Boolean).sort();
}

describe('two gateways and two schedulers on one Redis (append-only file)', () => {
  let c: TestCluster;
  const made: Sandbox[] = [];

  beforeAll(async () => {
    c = await TestCluster.start({ nodes: 2, store: 'redis', replicas: 2 });
    delete process.env.E2B_DEBUG;
    delete process.env.E2B_DOMAIN;
  });

  afterAll(async () => {
    await c?.stop();
  });

  it('serves a sandbox made through one gateway through the other', async () => {
    for (let k = 0; k < 4; k++) made.push(await Sandbox.create({ ...via(c, k % 2), timeoutMs: 600_000 }));
    expect(new Set((await c.placementOf()).values()).size).toBe(2);
    for (const [k, s] of made.entries()) {
      const other = await Sandbox.connect(s.sandboxId, via(c, (k + 1) % 2));
      expect((await other.commands.run(`echo ${k}`)).stdout).toBe(`${k}\n`);
    }
  });

  it('keeps placing and routing through both gateways while a scheduler replica is down', async () => {
    await c.stopScheduler('SIGKILL', 0);
    for (let k = 0; k < 2; k++) {
      const s = await Sandbox.create({ ...via(c, k), timeoutMs: 600_000 });
      made.push(s);
      expect((await s.commands.run('echo placed')).stdout).toBe('placed\n');
    }
    for (const s of made)
      expect((await c.apiAt(c.gatewayUrls[0]!, 'GET', `/sandboxes/${s.sandboxId}`)).status).toBe(200);
    // The nodes heartbeat to the replica that is left, so neither is judged lost meanwhile.
    const views = await c.nodeViews();
    expect(views.map((n) => n.status)).toEqual(['ready', 'ready']);
    await c.startScheduler(0);
  });

  it('leaves every sandbox reachable through the other gateway when one is SIGKILLed', async () => {
    await c.stopGateway(0, 'SIGKILL');
    const listed = await c.apiAt(c.gatewayUrls[1]!, 'GET', '/v2/sandboxes?limit=100');
    expect(listed.status).toBe(200);
    const ids = (listed.json as unknown as { sandboxID: string }[]).map((s) => s.sandboxID).sort();
    expect(ids).toEqual(made.map((s) => s.sandboxId).sort());
    await c.startGateway(0);
  });

  it('keeps the scheduler’s bindings through a Redis SIGKILL and restart, and goes on placing', async () => {
    const before = bindingKeys();
    expect(before).toHaveLength(made.length);
    await c.restartRedis('SIGKILL');
    // Read before any heartbeat could rewrite them: they come from the append-only file.
    expect(bindingKeys()).toEqual(before);
    for (let k = 0; k < 2; k++) {
      const got = await eventually(
        async () => {
          const r = await c.apiAt(c.gatewayUrls[k]!, 'GET', `/sandboxes/${made[k]!.sandboxId}`);
          expect(r.status).toBe(200);
          return r;
        },
        { timeoutMs: 15_000, intervalMs: 250 },
      );
      expect(got.json).toMatchObject({ state: 'running' });
    }
    const after = await Sandbox.create(via(c, 1));
    expect((await after.commands.run('echo again')).stdout).toBe('again\n');
    made.push(after);
  });
});
