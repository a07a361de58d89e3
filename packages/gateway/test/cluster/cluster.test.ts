import { execFile } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { TEST_CLUSTER_KEY as API_KEY, TestCluster } from '@agentenv/test-support/cluster';
import { inBatches, useGateway } from './sdk-env.js';

const NODES = 3;
const AENV = fileURLToPath(new URL('../../../cli/bin/aenv.js', import.meta.url));

describe('a 3-node cluster through the gateway (Redis store)', () => {
  let c: TestCluster;
  const made: Sandbox[] = [];

  beforeAll(async () => {
    c = await TestCluster.start({ nodes: NODES, store: 'redis' });
    useGateway(c.gatewayUrl);
  });

  afterAll(async () => {
    await c?.stop();
  });

  it('spreads 60 creates over all three nodes, none holding more than half', async () => {
    const tag = `spread${Date.now()}`;
    // 6 at a time: more would only wait in the nodes' start queues on this 2-core machine.
    const indexes = Array.from({ length: 60 }, (_, i) => i);
    made.push(...(await inBatches(indexes, 12, (i) => Sandbox.create({ metadata: { tag, i: String(i) } }))));
    const where = await c.placementOf();
    const counts = Array.from(
      { length: NODES },
      (_, n) => made.filter((s) => where.get(s.sandboxId) === n).length,
    );
    console.log(`placement of 60 creates over ${NODES} nodes: ${counts.join(' / ')}`);
    expect(counts.reduce((a, b) => a + b)).toBe(60);
    for (const n of counts) {
      expect(n).toBeGreaterThan(0);
      expect(n).toBeLessThanOrEqual(30);
    }
  });

  it('lists every node merged, newest first, across pages', async () => {
    const pager = Sandbox.list({ limit: 7 });
    const seen: { sandboxId: string; startedAt: Date }[] = [];
    let pages = 0;
    while (pager.hasNext) {
      const items = await pager.nextItems();
      pages++;
      if (pager.hasNext) expect(items).toHaveLength(7);
      seen.push(...items);
    }
    expect(pages).toBe(Math.ceil(60 / 7));
    expect(new Set(seen.map((s) => s.sandboxId))).toEqual(new Set(made.map((s) => s.sandboxId)));
    expect(seen).toHaveLength(60);
    const times = seen.map((s) => s.startedAt.getTime());
    expect(times).toEqual([...times].sort((a, b) => b - a));
    // Filters reach every node: one sandbox by metadata.
    const tagged = await Sandbox.list({ query: { metadata: { i: '17' } } }).nextItems();
    expect(tagged.map((s) => s.sandboxId)).toEqual([made[17]!.sandboxId]);
  });

  it('runs commands, files and a PTY in sandboxes of every node', async () => {
    const where = await c.placementOf();
    const one = Array.from({ length: NODES }, (_, n) => made.find((s) => where.get(s.sandboxId) === n)!);
    for (const sbx of one) {
      expect((await sbx.commands.run('echo $E2B_SANDBOX_ID')).stdout.trim()).toBe(sbx.sandboxId);
      await sbx.files.write('/home/user/n.txt', `node file ${sbx.sandboxId}`);
      expect(await sbx.files.read('/home/user/n.txt')).toBe(`node file ${sbx.sandboxId}`);
      let screen = '';
      const term = await sbx.pty.create({
        cols: 90,
        rows: 20,
        onData: (d) => void (screen += new TextDecoder().decode(d)),
      });
      await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo "cols=$(tput cols)"\n'));
      await eventually(() => expect(screen).toMatch(/cols=90/), { timeoutMs: 20_000, intervalMs: 50 });
      await sbx.pty.kill(term.pid);
    }
    await inBatches(made.splice(0), 8, (s) => s.kill());
    await eventually(async () => expect([...(await c.placementOf()).keys()]).toEqual([]), {
      timeoutMs: 60_000,
    });
  });

  it('forks a running sandbox into 16 children through the gateway', async () => {
    const parent = await Sandbox.create();
    try {
      await parent.files.write('/home/user/parent.txt', 'from the parent');
      const r = await c.api('POST', `/sandboxes/${parent.sandboxId}/fork`, { count: 16 });
      expect(r.status).toBe(201);
      const results = r.json as unknown as { sandbox?: { sandboxID: string }; error?: unknown }[];
      expect(results).toHaveLength(16);
      expect(results.filter((x) => x.error)).toEqual([]);
      const children = await Promise.all(results.map((x) => Sandbox.connect(x.sandbox!.sandboxID)));
      try {
        const outs = await inBatches(
          children,
          4,
          async (ch) => (await ch.commands.run('cat /home/user/parent.txt')).stdout,
        );
        expect(new Set(outs)).toEqual(new Set(['from the parent']));
        // Every child is routable by the gateway (recorded with the scheduler).
        for (const ch of children)
          expect((await c.api('GET', `/sandboxes/${ch.sandboxId}`)).status).toBe(200);
      } finally {
        await inBatches(children, 8, (ch) => ch.kill());
      }
    } finally {
      await parent.kill();
    }
  });

  it('shows nodes and the cluster through GET /nodes, and 404s an unknown sandbox', async () => {
    const nodes = await c.nodeViews();
    expect(nodes.map((n) => n.nodeID).sort()).toEqual(['h9n0', 'h9n1', 'h9n2']);
    expect((await c.api('GET', `/nodes/h9n1`)).json).toMatchObject({ nodeID: 'h9n1', status: 'ready' });
    expect((await c.api('GET', `/nodes/nope`)).status).toBe(404);
    const unknown = await c.api('GET', '/sandboxes/doesnotexist0000');
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ code: 404, message: expect.stringContaining('not found') });
    expect((await c.api('GET', '/v2/sandboxes', undefined, { 'x-api-key': 'e2b_wrong' })).status).toBe(401);
    const { stdout } = await promisify(execFile)(process.execPath, [AENV, 'nodes', 'ls', '-o', 'json'], {
      env: { ...process.env, AENV_URL: c.gatewayUrl, AENV_API_KEY: API_KEY, HOME: '/nonexistent' },
    });
    const listed = JSON.parse(stdout) as { nodeID: string; status: string }[];
    expect(listed.map((n) => n.nodeID).sort()).toEqual(['h9n0', 'h9n1', 'h9n2']);
    const metrics = await (await fetch(`${c.gatewayUrl}/metrics`)).text();
    expect(metrics).toMatch(/aenv_gateway_placements_total\{outcome="placed"\} \d+/);
    expect(metrics).toMatch(/aenv_gateway_create_queue_depth 0/);
    expect(metrics).toMatch(/aenv_gateway_node_sandboxes\{node="h9n0"/);
  });

  it('gives sandbox code no way to the gateway, the scheduler, Redis or the nodes on any host address', async () => {
    const sbx = await Sandbox.create();
    try {
      // Every IPv4 address of this host (127.0.0.1 is the sandbox's own loopback in there), the
      // sandbox's default gateway, and the metadata address.
      const addresses = [
        ...new Set(
          Object.values(networkInterfaces())
            .flat()
            .flatMap((a) => (a && a.family === 'IPv4' ? [a.address] : [])),
        ),
        '169.254.169.254',
      ];
      const ports = [c.gatewayUrl, ...Array.from({ length: NODES }, (_, i) => c.nodeUrl(i))]
        .map((u) => new URL(u).port)
        .concat(['19901', '19902', '80']);
      const probe = (to: string) =>
        `(timeout 3 bash -c "exec 3<>/dev/tcp/${to}" 2>/dev/null && echo "open ${to}") &`;
      const script = [
        // The default gateway, from the routing table (no `ip` needed).
        `gw=$(awk '$2=="00000000"{print $3; exit}' /proc/net/route)`,
        'gwip=$(printf "%d.%d.%d.%d" 0x${gw:6:2} 0x${gw:4:2} 0x${gw:2:2} 0x${gw:0:2})',
        `for p in ${ports.join(' ')}; do ${probe('$gwip/$p')} done`,
        ...addresses.flatMap((a) => ports.map((p) => probe(`${a}/${p}`))),
        // The probe itself works: envd's own port answers.
        probe('127.0.0.1/49983'),
        'wait',
      ].join('\n');
      const { stdout } = await sbx.commands.run(script, { timeoutMs: 60_000 });
      expect(stdout.trim().split('\n').sort()).toEqual(['open 127.0.0.1/49983']);
    } finally {
      await sbx.kill();
    }
  });
});
