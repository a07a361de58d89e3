import { Sandbox, Template } from 'e2b';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { TestCluster } from '@agentenv/test-support/cluster';
import { inBatches, useGateway } from './sdk-env.js';

/** Small nodes, so "while it has room" is reached with a handful of sandboxes. */
const CAP = 5;

describe('placement over 3 nodes of 5 sandboxes each: locality, shared snapshots and templates, fork spill', () => {
  let c: TestCluster;

  beforeAll(async () => {
    c = await TestCluster.start({ nodes: 3, store: 'redis', nodeEnv: { AENV_MAX_SANDBOXES: String(CAP) } });
    useGateway(c.gatewayUrl);
  });

  afterEach(async () => {
    await c.killAll();
    // The scheduler hears of the kills with the next heartbeats.
    await eventually(
      async () => expect((await c.nodeViews()).filter((n) => n.sandboxCount > 0)).toEqual([]),
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  });

  afterAll(async () => {
    await c?.stop();
  });

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
