import { execFile } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRepository } from '@agentenv/snapshot';
import { eventually } from '@agentenv/test-support';
import {
  TEST_CLUSTER_KEY as API_KEY,
  TEST_CLUSTER_STORE as SNAPSHOT_STORE,
  TestCluster,
} from '@agentenv/test-support/cluster';
import { inBatches, useGateway } from './sdk-env.js';

const NODES = 3;
/** Creates for the spread and the merged list, whose last page of 7 is then a partial one. */
const SPREAD = 30;
const AENV = fileURLToPath(new URL('../../../cli/bin/aenv.js', import.meta.url));

/**
 * One 3-node cluster on Redis for the file: first what it does whole, then what it does when its
 * parts fail (nodes SIGKILLed, the scheduler restarted), which leaves it changed.
 */
let c: TestCluster;

beforeAll(async () => {
  c = await TestCluster.start({ nodes: NODES, store: 'redis' });
  useGateway(c.gatewayUrl);
});

afterAll(async () => {
  // A killed node comes back once so it reclaims what its crash left (processes, namespaces);
  // the tests leave two such nodes, which start side by side as at the cluster's start.
  await Promise.all(
    Array.from({ length: NODES }, (_, i) =>
      !c?.nodes[i] && c?.scheduler ? c.startNode(i).catch(() => undefined) : undefined,
    ),
  );
  await c?.stop();
});

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

describe('a 3-node cluster through the gateway (Redis store)', () => {
  const made: Sandbox[] = [];

  it(`spreads ${SPREAD} creates over all three nodes, none holding more than half`, async () => {
    const tag = `spread${Date.now()}`;
    // 12 at a time: more would only wait in the nodes' start queues on this 2-core machine.
    const indexes = Array.from({ length: SPREAD }, (_, i) => i);
    made.push(...(await inBatches(indexes, 12, (i) => Sandbox.create({ metadata: { tag, i: String(i) } }))));
    const where = await c.placementOf();
    const counts = Array.from(
      { length: NODES },
      (_, n) => made.filter((s) => where.get(s.sandboxId) === n).length,
    );
    console.log(`placement of ${SPREAD} creates over ${NODES} nodes: ${counts.join(' / ')}`);
    expect(counts.reduce((a, b) => a + b)).toBe(SPREAD);
    for (const n of counts) {
      expect(n).toBeGreaterThan(0);
      expect(n).toBeLessThanOrEqual(SPREAD / 2);
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
    expect(pages).toBe(Math.ceil(SPREAD / 7));
    expect(new Set(seen.map((s) => s.sandboxId))).toEqual(new Set(made.map((s) => s.sandboxId)));
    expect(seen).toHaveLength(SPREAD);
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
      // Each probe a subshell, not a `timeout` and a bash of its own: a process started in gVisor
      // costs tens of ms, and the probes took 20 s to start. One `timeout` around them all ends
      // those a drop leaves hanging (it signals its whole process group); they are all started
      // within a second or two, so each still has 3 s or more to connect.
      const probe = (to: string) => `(exec 3<>/dev/tcp/${to} && echo "open ${to}") 2>/dev/null &`;
      const probes = [
        // The probe itself works: envd's own port answers (first, well within the timeout).
        probe('127.0.0.1/49983'),
        // The default gateway, from the routing table (no `ip` needed).
        `gw=$(awk '$2=="00000000"{print $3; exit}' /proc/net/route)`,
        'gwip=$(printf "%d.%d.%d.%d" 0x${gw:6:2} 0x${gw:4:2} 0x${gw:2:2} 0x${gw:0:2})',
        `for p in ${ports.join(' ')}; do ${probe('$gwip/$p')} done`,
        ...addresses.flatMap((a) => ports.map((p) => probe(`${a}/${p}`))),
        'wait',
      ].join('\n');
      const script = `timeout 5 bash -c '${probes.replaceAll("'", `'\\''`)}'\ntrue`;
      const { stdout } = await sbx.commands.run(script, { timeoutMs: 60_000 });
      expect(stdout.trim().split('\n').sort()).toEqual(['open 127.0.0.1/49983']);
    } finally {
      await sbx.kill();
    }
  });
});

describe('node loss and scheduler restarts (Redis store)', () => {
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
