/**
 * Cluster benchmark: the gateway's overhead against calls made straight to a node, measured in
 * one run on a real 3-node cluster (redis-server, aenv-scheduler, aenv-gateway, pool off), and
 * the burst: 300 concurrent creates against a cluster capped at 60.
 * Run as root: npx tsx bench/cluster.ts [--iter 15] [--runs 30] [--burst 300]
 */
import { parseArgs } from 'node:util';
import { Sandbox } from 'e2b';
import { TEST_CLUSTER_KEY as API_KEY, TestCluster } from '@agentenv/test-support/cluster';
import { line, percentile, timeMs } from './stats.js';

const { values } = parseArgs({
  options: {
    iter: { type: 'string', default: '15' },
    runs: { type: 'string', default: '30' },
    burst: { type: 'string', default: '300' },
  },
});
const ITER = Number(values.iter);
const RUNS = Number(values.runs);
const BURST = Number(values.burst);
const PER_NODE = 20;

const post = (base: string, path: string, body: unknown) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const kill = (base: string, id: string) =>
  fetch(`${base}/sandboxes/${id}`, { method: 'DELETE', headers: { 'x-api-key': API_KEY } }).then((r) =>
    r.body?.cancel(),
  );

const c = await TestCluster.start({
  nodes: 3,
  store: 'redis',
  nodeEnv: { AENV_MAX_SANDBOXES: String(PER_NODE) },
});
try {
  // Warm every node's template cache, so neither side pays a first restore.
  for (let i = 0; i < 3; i++) {
    const r = await post(c.nodeUrl(i), '/sandboxes', { templateID: 'base' });
    await kill(c.nodeUrl(i), ((await r.json()) as { sandboxID: string }).sandboxID);
  }

  // Creates, alternating: through the gateway, then straight to a node (taking turns).
  const viaGateway: number[] = [];
  const direct: number[] = [];
  for (let i = 0; i < ITER; i++) {
    for (const [base, out] of [
      [c.gatewayUrl, viaGateway],
      [c.nodeUrl(i % 3), direct],
    ] as const) {
      let id = '';
      out.push(
        await timeMs(async () => {
          const r = await post(base, '/sandboxes', { templateID: 'base' });
          if (r.status !== 201) throw new Error(`create via ${base}: ${r.status} ${await r.text()}`);
          id = ((await r.json()) as { sandboxID: string }).sandboxID;
        }),
      );
      await kill(base, id);
    }
  }

  // commands.run round trips on one sandbox, through the gateway and straight to its node.
  const sbx = await Sandbox.create({ apiUrl: c.gatewayUrl, sandboxUrl: c.gatewayUrl, apiKey: API_KEY });
  const node = (await c.placementOf()).get(sbx.sandboxId)!;
  const opts = (url: string) => ({ apiUrl: url, sandboxUrl: url, apiKey: API_KEY });
  const gw = await Sandbox.connect(sbx.sandboxId, opts(c.gatewayUrl));
  const dn = await Sandbox.connect(sbx.sandboxId, opts(c.nodeUrl(node)));
  const runGw: number[] = [];
  const runDn: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    runGw.push(await timeMs(() => gw.commands.run('true')));
    runDn.push(await timeMs(() => dn.commands.run('true')));
  }
  await sbx.kill();

  // The burst: every call answered, how long, where the 201s went.
  const t0 = Date.now();
  const answers = await Promise.all(
    Array.from({ length: BURST }, async () => {
      const t = Date.now();
      const r = await post(c.gatewayUrl, '/sandboxes', { templateID: 'base', timeout: 600 });
      const json = (await r.json()) as { sandboxID?: string };
      return { status: r.status, ms: Date.now() - t, id: json.sandboxID };
    }),
  );
  const wall = Date.now() - t0;
  const where = await c.placementOf();
  const created = answers.filter((a) => a.status === 201);
  const refused = answers.filter((a) => a.status === 429);
  const others = answers.filter((a) => a.status !== 201 && a.status !== 429);
  const spread = [0, 1, 2].map((n) => created.filter((a) => where.get(a.id!) === n).length);
  const metrics = await (await fetch(`${c.gatewayUrl}/metrics`)).text();
  const waitCount = Number(/aenv_gateway_create_queue_wait_seconds_count (\S+)/.exec(metrics)?.[1] ?? 0);
  const waitSum = Number(/aenv_gateway_create_queue_wait_seconds_sum (\S+)/.exec(metrics)?.[1] ?? 0);
  await Promise.all(created.map((a) => kill(c.gatewayUrl, a.id!)));

  console.log(
    `\ncluster bench: 3 nodes (pool off), ${ITER} creates each way, ${RUNS} commands.run each way\n`,
  );
  line('create (REST, until 201) via the gateway', viaGateway, direct);
  line('create straight to a node', direct);
  line('commands.run("true") via the gateway', runGw, runDn);
  line('commands.run("true") straight to the node', runDn);
  console.log(
    `\nburst: ${BURST} concurrent creates vs a cluster of 3×${PER_NODE}, all answered in ${wall} ms`,
  );
  console.log(
    `  ${created.length}×201, ${refused.length}×429, ${others.length}× other (${others.map((a) => a.status).join(',')})`,
  );
  console.log(`  placement of the 201s over the nodes: ${spread.join(' / ')}`);
  console.log(
    `  201 latency p50/p95 ${percentile(
      created.map((a) => a.ms),
      50,
    )}/${percentile(
      created.map((a) => a.ms),
      95,
    )} ms; ` +
      `429 latency p50/p95 ${percentile(
        refused.map((a) => a.ms),
        50,
      )}/${percentile(
        refused.map((a) => a.ms),
        95,
      )} ms`,
  );
  console.log(
    `  admission queue: ${waitCount} creates admitted, mean wait ${((1000 * waitSum) / Math.max(1, waitCount)).toFixed(0)} ms`,
  );
} finally {
  await c.stop();
}
