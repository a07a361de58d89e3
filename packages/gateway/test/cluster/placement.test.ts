import { Sandbox, Template } from 'e2b';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { TEST_CLUSTER_KEY as API_KEY, TestCluster } from '@agentenv/test-support/cluster';
import { inBatches, useGateway } from './sdk-env.js';

/**
 * Small nodes, so "while it has room" is reached with a handful of sandboxes, and a burst
 * overflows the cluster at once (bench/cluster.ts runs the same burst against nodes of 20).
 */
const CAP = 5;
const BURST = 300;

let c: TestCluster;

beforeAll(async () => {
  c = await TestCluster.start({ nodes: 3, store: 'redis', nodeEnv: { AENV_MAX_SANDBOXES: String(CAP) } });
  useGateway(c.gatewayUrl);
});

// Each case starts on an idle cluster.
afterEach(async () => {
  await c.killAll();
  // The scheduler hears of the kills with the next heartbeats.
  await eventually(async () => expect((await c.nodeViews()).filter((n) => n.sandboxCount > 0)).toEqual([]), {
    timeoutMs: 30_000,
    intervalMs: 250,
  });
});

afterAll(async () => {
  await c?.stop();
});

describe('placement over 3 nodes of 5 sandboxes each: locality, shared snapshots and templates, fork spill', () => {
  /** Creates one after another; returns each sandbox with the node index it landed on. */
  async function createSequentially(n: number, template: string) {
    const out: { sbx: Sandbox; node: number }[] = [];
    for (let i = 0; i < n; i++) {
      const sbx = await Sandbox.create(template);
      out.push({ sbx, node: (await c.placementOf()).get(sbx.sandboxId)! });
    }
    return out;
  }

  it('sends creates of a capture cached on one node to it while it has room; the snapshot starts sandboxes on the others', async () => {
    const src = await Sandbox.create();
    await src.files.write('/home/user/snap.txt', 'taken on node A');
    const snap = await src.createSnapshot();
    const a = (await c.placementOf()).get(src.sandboxId)!;
    // The source holds one place on A: CAP - 1 more fit there.
    const local = await createSequentially(CAP - 1, snap.snapshotId);
    const hits = local.filter((x) => x.node === a).length;
    console.log(
      `locality: ${hits}/${local.length} creates of the snapshot went to its node (hit rate ${((100 * hits) / local.length).toFixed(0)} %)`,
    );
    expect(hits).toBe(local.length);
    // A is full: the same snapshot now starts on the other nodes, from the shared repository.
    // The first node it starts on holds it in cache from then on and takes the next ones while it
    // has room, so the last node is reached at the latest when that one is full.
    const spilled: { sbx: Sandbox; node: number }[] = [];
    const others = new Set<number>();
    for (let i = 0; i < 2 * CAP && others.size < 2; i++) {
      const [x] = await createSequentially(1, snap.snapshotId);
      spilled.push(x!);
      others.add(x!.node);
    }
    expect(others.has(a)).toBe(false);
    expect(others.size).toBe(2);
    for (const { sbx } of [...local, ...spilled])
      expect(await sbx.files.read('/home/user/snap.txt')).toBe('taken on node A');
  });

  it('uses a template built once on every node', async () => {
    const name = `h9tpl${Date.now()}`;
    await Template.build(
      Template().fromTemplate('base').runCmd('echo built-once > /home/user/built.txt'),
      name,
    );
    try {
      const used = new Set<number>();
      const made: Sandbox[] = [];
      for (let i = 0; i < 3 * CAP && used.size < 3; i++) {
        const sbx = await Sandbox.create(name);
        made.push(sbx);
        used.add((await c.placementOf()).get(sbx.sandboxId)!);
        expect((await sbx.commands.run('cat /home/user/built.txt')).stdout).toBe('built-once\n');
      }
      expect(used.size).toBe(3);
      await inBatches(made, 8, (s) => s.kill());
    } finally {
      await c.api('DELETE', `/templates/${name}`);
    }
  });

  it('starts fork children on the parent node and spills those it has no room for to other nodes', async () => {
    const parent = await Sandbox.create();
    await parent.files.write('/home/user/parent.txt', 'forked');
    const p = (await c.placementOf()).get(parent.sandboxId)!;
    const count = CAP + 1;
    const r = await c.api('POST', `/sandboxes/${parent.sandboxId}/fork`, { count });
    expect(r.status).toBe(201);
    const results = r.json as unknown as { sandbox?: { sandboxID: string }; error?: unknown }[];
    expect(results.filter((x) => x.error)).toEqual([]);
    const where = await c.placementOf();
    const nodes = results.map((x) => where.get(x.sandbox!.sandboxID));
    expect(nodes.filter((n) => n === p)).toHaveLength(CAP - 1);
    expect(nodes.filter((n) => n !== p && n !== undefined)).toHaveLength(count - (CAP - 1));
    for (const x of results) {
      const child = await Sandbox.connect(x.sandbox!.sandboxID);
      expect((await child.commands.run('cat /home/user/parent.txt')).stdout).toBe('forked');
    }
  });
});

describe(`burst admission: ${BURST} concurrent creates against a cluster that holds ${3 * CAP}`, () => {
  const create = (
    headers: Record<string, string> = {},
    body: unknown = { templateID: 'base', timeout: 600 },
  ) =>
    fetch(`${c.gatewayUrl}/sandboxes`, {
      method: 'POST',
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }).then(async (r) => ({
      status: r.status,
      retryAfter: r.headers.get('retry-after'),
      json: (await r.json()) as Record<string, unknown>,
    }));

  // First: after the burst the nodes are still reclaiming the killed sandboxes' host resources,
  // and the scheduler sees the places free only at the nodes' next heartbeats, so creates get 429
  // with Retry-After for a while.
  it('returns the same sandbox to retries with one Idempotency-Key, concurrent or later', async () => {
    const key = { 'idempotency-key': `h9-${Date.now()}` };
    const first = await Promise.all(Array.from({ length: 5 }, () => create(key)));
    expect(first.map((a) => a.status)).toEqual([201, 201, 201, 201, 201]);
    const id = first[0]!.json.sandboxID as string;
    expect(new Set(first.map((a) => a.json.sandboxID))).toEqual(new Set([id]));
    const later = await create(key);
    expect(later).toMatchObject({ status: 201, json: { sandboxID: id } });
    const reused = await create(key, { templateID: 'base', timeout: 60 });
    expect(reused).toMatchObject({ status: 409, json: { code: 409 } });
    expect([...(await c.placementOf()).keys()]).toEqual([id]);
    expect((await c.api('DELETE', `/sandboxes/${id}`)).status).toBe(204);
  });

  it('answers every call 201 or 429 with Retry-After, and leaks no sandbox', async () => {
    const answers = await Promise.all(Array.from({ length: BURST }, () => create()));
    const by = new Map<number, number>();
    for (const a of answers) by.set(a.status, (by.get(a.status) ?? 0) + 1);
    console.log(`burst of ${BURST}: ${[...by].map(([s, n]) => `${n}×${s}`).join(', ')}`);
    expect([...by.keys()].filter((s) => s !== 201 && s !== 429)).toEqual([]);
    for (const a of answers.filter((x) => x.status === 429)) {
      expect(Number(a.retryAfter)).toBeGreaterThan(0);
      expect(a.json).toMatchObject({ code: 429, message: expect.any(String) });
    }
    const ids = answers.filter((a) => a.status === 201).map((a) => a.json.sandboxID as string);
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.length).toBeLessThanOrEqual(3 * CAP);
    // Every sandbox that exists was answered to a client: none was made for a refused call.
    expect(new Set((await c.placementOf()).keys())).toEqual(new Set(ids));
    const metrics = await (await fetch(`${c.gatewayUrl}/metrics`)).text();
    console.log(
      metrics
        .split('\n')
        .filter((l) => /^aenv_gateway_(placements_total|create_queue_wait_seconds_(count|sum))/.test(l))
        .join('\n'),
    );
    await Promise.all(
      ids.map((id) =>
        fetch(`${c.gatewayUrl}/sandboxes/${id}`, { method: 'DELETE', headers: { 'x-api-key': API_KEY } }),
      ),
    );
    await eventually(async () => expect([...(await c.placementOf()).keys()]).toEqual([]), {
      timeoutMs: 60_000,
    });
  });
});
