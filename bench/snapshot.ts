/**
 * Snapshot benchmark (issue #5): snapshot latency (quiet and writing sandboxes), fork of 1/4/16
 * children, repository growth along a chain of captures, and restore from a cold vs warm runtime
 * cache, through a real aenv-server, next to bare runsc doing the same runtime work (checkpoint,
 * parallel restores of the same capture) in the same run.
 *
 * The node it starts shares nothing with the tests or other benches: port 18107, home
 * /var/lib/aenv-bench-snap (only the base rootfs layer is borrowed from the test home, read-only),
 * network tag `bs` in 10.150.0.0/16, runtime dir /run/aenv-bench-snap. Everything is removed at
 * the end, also on failure or Ctrl-C.
 *
 * Run as root: npx tsx bench/snapshot.ts [--iter 10] [--fork-reps 5]
 */
import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Sandbox } from 'e2b';
import { ENVD_PORT } from '@agentenv/protocol';
import { inspectGvisorHost } from '@agentenv/node';
import { PosixRepository, readCapture, SnapshotStore } from '@agentenv/snapshot';
import { api, startServer, useSdkEnv, type TestServer } from '@agentenv/test-support/server';
import { createTestNet, destroyAllTestNets, type TestNet } from '@agentenv/test-support/runtime';
import { cleanupOnSignals, leftBehind } from './leftovers.js';
import { bareRunsc, templateCapture, type BareSource } from './bare-runsc.js';
import { fmt, line, percentile, timeMs } from './stats.js';
import { benchNode, borrowBaseRootfs, runBench, stopBenchServer } from './bench-node.js';

const { values } = parseArgs({
  options: { iter: { type: 'string', default: '10' }, 'fork-reps': { type: 'string', default: '5' } },
});
const ITER = Number(values.iter);
const FORK_REPS = Number(values['fork-reps']);

const {
  url: URL_BASE,
  home: HOME,
  runtime: RUNTIME,
  tag: TAG,
  env: SERVER_ENV,
} = benchNode({ port: 18107, name: 'snap', tag: 'bs', hostRange: '10.150.0.0/16' });
const BARE_DIR = `${RUNTIME}-bare`;
const STORE = join(HOME, 'snapshot-store');
const CACHE = join(HOME, 'snapshot-cache');

/** Writes fresh random data at WRITE_MB MB/s into a 64 MiB ring file, counting bytes in a file. */
const WRITE_MB = 32;
const WRITER = `
import os, time
RING, BLK, RATE = 64 << 20, 1 << 20, ${WRITE_MB} << 20
f = open('/tmp/aenv-bench-ring', 'wb+')
n, t0 = 0, time.time()
while True:
    f.seek(n * BLK % RING); f.write(os.urandom(BLK)); f.flush(); n += 1
    with open('/tmp/aenv-bench-written.tmp', 'w') as c: c.write(str(n * BLK))
    os.replace('/tmp/aenv-bench-written.tmp', '/tmp/aenv-bench-written')
    lag = t0 + n * BLK / RATE - time.time()
    if lag > 0: time.sleep(lag)
    elif lag < -1: t0 -= lag + 1
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (b: number) => `${(b / 2 ** 20).toFixed(b < 2 ** 20 ? 3 : 1)} MiB`;
const now = () => performance.now();

/** Apparent size of everything under a directory (what a copy of it would store). */
async function dirBytes(dir: string): Promise<number> {
  let n = 0;
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) n += (await stat(join(e.parentPath, e.name))).size;
  }
  return n;
}

// ------------------------------------------------------------------ setup and cleanup

const inspected = await inspectGvisorHost();
if ('problem' in inspected) throw new Error(inspected.problem);
const host = inspected;
const bare = bareRunsc(host, { dir: BARE_DIR, cgroupParent: 'aenv-bench-snap' });
let server: TestServer | undefined;

async function stopServer(): Promise<void> {
  if (!server) return;
  await stopBenchServer(server);
  server = undefined;
}

async function startNode(env: Record<string, string> = {}): Promise<void> {
  server = await startServer({ ...SERVER_ENV, ...env });
  useSdkEnv(URL_BASE);
}

let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await stopServer().catch((e: unknown) => console.error('stopping the server:', e));
  await bare.cleanup().catch((e: unknown) => console.error('bare runsc cleanup:', e));
  destroyAllTestNets();
  for (const d of [HOME, RUNTIME, BARE_DIR]) await rm(d, { recursive: true, force: true });
  // What must not be left: the node's namespaces and chains, mounts, runsc processes.
  const left = leftBehind([`aenv-${TAG}-`, `aenvtest-${process.pid}-`], [HOME, RUNTIME]);
  if (left.length) console.error(`left behind:\n${left.join('\n')}`);
}

cleanupOnSignals(cleanup);

// ------------------------------------------------------------------ measurements

interface Result {
  chain: { first: number; rest: number[]; full: number[] };
  quiet: number[];
  quietGrowth: number[];
  rawQuiet: number[];
  writing: number[];
  writingGrowth: number[];
  rawWriting: number[];
  rates: { node: number; raw: number };
  storeBreakdown: { what: string; full: number; known: number[]; bytes: number }[];
  fork: Map<number, { node: number[]; raw: number[] }>;
  restore: { cold: number[]; warm: number[]; capacity: number; sizes: number[] };
}

/** Waits until the node's snapshot is in the repository (its answer came before that). */
async function storedInRepository(id: string): Promise<void> {
  while ((await api('GET', `/snapshots/${id}`)).json.stored !== true) await sleep(20);
}

/** Snapshots through the SDK (the answer's time), with the repository's growth per snapshot. */
async function snapshots(sbx: Sandbox, n: number) {
  const ms: number[] = [];
  const growth: number[] = [];
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const before = await dirBytes(STORE);
    let id = '';
    ms.push(await timeMs(async () => (id = (await sbx.createSnapshot()).snapshotId)));
    await storedInRepository(id);
    growth.push((await dirBytes(STORE)) - before);
    ids.push(id);
    await sleep(300);
  }
  return { ms, growth, ids };
}

/** A bare sandbox restored from `capture` (until envd answers), on its own test network. */
async function bareRestore(capture: string, source: BareSource, resources: BareResources) {
  const net = createTestNet();
  const b = await bare.bundle(net, source, resources);
  await bare.launch(['restore', '--image-path', capture, '--bundle', b.dir, '--detach', b.id]);
  await bare.healthy(net);
  return { id: b.id, net };
}
type BareResources = Parameters<typeof bare.bundle>[2];

async function captureSource(dir: string): Promise<{ source: BareSource; resources: BareResources }> {
  const { meta } = await readCapture(dir);
  if (meta.layers.length !== 1) throw new Error(`${dir}: bare runsc needs a single-layer capture`);
  return {
    source: { rootfs: meta.layers[0]!, init: meta.init, mounts: meta.mounts, hostname: meta.hostname },
    resources: meta.resources,
  };
}

/** Raw `runsc checkpoint --leave-running`, as the driver runs it, `n` times. */
async function rawCheckpoints(id: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const dir = join(BARE_DIR, 'ckpt', `${id}-${i}`);
    await mkdir(dir, { recursive: true });
    out.push(
      await timeMs(() =>
        bare.run(['checkpoint', '--image-path', dir, '--compression=none', '--leave-running', id]),
      ),
    );
    await rm(dir, { recursive: true, force: true });
    await sleep(300);
  }
  return out;
}

async function healthyThroughNode(id: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`${URL_BASE}/health`, {
      headers: { 'e2b-sandbox-id': id, 'e2b-sandbox-port': String(ENVD_PORT) },
    }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`child ${id} not healthy through the node in 60 s`);
    await sleep(20);
  }
}

async function main(): Promise<Result> {
  await cleanupLeftovers();
  await borrowBaseRootfs(HOME);
  await startNode();
  await (await Sandbox.create()).kill(); // builds the template's ready state in HOME
  const template = await templateCapture(HOME);
  const tpl = await captureSource(template);
  const long = { timeoutMs: 3_600_000 };

  // 1. Chain of 10 captures of one sandbox with a small change (1 MiB of new file) before each,
  //    on an empty repository (so nothing is shared with other sandboxes' captures yet).
  const c = await Sandbox.create(long);
  const chain = { first: 0, rest: [] as number[], full: [] as number[] };
  for (let i = 0; i < 10; i++) {
    await c.commands.run(`head -c 1048576 /dev/urandom > /home/user/change-${i}`);
    const { growth, ids } = await snapshots(c, 1);
    if (i === 0) chain.first = growth[0]!;
    else chain.rest.push(growth[0]!);
    chain.full.push(await dirBytes(join(CACHE, ids[0]!)));
  }
  await c.kill();

  // 2. Snapshot latency of a quiet sandbox vs raw checkpoint of a bare one restored from the same
  //    template capture.
  const q = await Sandbox.create(long);
  await sleep(2000);
  const quiet = await snapshots(q, ITER);
  const rq = await bareRestore(template, tpl.source, tpl.resources);
  await sleep(2000);
  const rawQuiet = await rawCheckpoints(rq.id, ITER);
  await bare.kill(rq.id);
  rq.net.destroy();

  // 3. The same while a process writes fresh data at WRITE_MB MB/s.
  const w = await Sandbox.create(long);
  await w.files.write('/tmp/aenv-bench-writer.py', WRITER);
  await w.commands.run('nohup python3 /tmp/aenv-bench-writer.py >/dev/null 2>&1 &');
  await sleep(3000);
  const written = async () => Number(await w.files.read('/tmp/aenv-bench-written'));
  let [b0, t0] = [await written(), now()];
  const writing = await snapshots(w, ITER);
  const nodeRate = ((await written()) - b0) / ((now() - t0) / 1000);
  const rw = await bareRestore(template, tpl.source, tpl.resources);
  // (not `exec --detach`: runsc appends its --pid-file flag after the command's arguments)
  await bare.run(['exec', rw.id, '/bin/sh', '-c', 'nohup python3 -c "$0" >/dev/null 2>&1 &', WRITER]);
  await sleep(3000);
  const rawWritten = async () => Number(await bare.run(['exec', rw.id, 'cat', '/tmp/aenv-bench-written']));
  [b0, t0] = [await rawWritten(), now()];
  const rawWriting = await rawCheckpoints(rw.id, ITER);
  const rawRate = ((await rawWritten()) - b0) / ((now() - t0) / 1000);
  await bare.kill(rw.id);
  rw.net.destroy();

  // Where a snapshot's time goes beyond the checkpoint: the store step (chunk, hash, write the
  // new chunks) on copies of the two captures, in this process, into a scratch repository.
  const storeBreakdown: Result['storeBreakdown'] = [];
  for (const [what, id] of [
    ['quiet', quiet.ids.at(-1)!],
    ['writing', writing.ids.at(-1)!],
  ] as const) {
    const copy = join(HOME, 'scratch', id);
    await cp(join(CACHE, id), copy, { recursive: true });
    const repository = new PosixRepository({ path: join(HOME, 'scratch', `repo-${what}`) });
    await repository.open();
    const store = new SnapshotStore({ repository });
    const full = await timeMs(() => store.storeCapture(copy));
    const known: number[] = [];
    for (let i = 0; i < 3; i++) known.push(await timeMs(() => store.storeCapture(copy)));
    storeBreakdown.push({ what, full, known, bytes: await dirBytes(copy) });
    await rm(join(HOME, 'scratch'), { recursive: true, force: true });
  }
  await w.kill();

  // 4. Fork of the quiet sandbox into k children, until every child answers /health through the
  //    node, vs k bare restores in parallel of a capture of the same sandbox (its snapshot).
  const base = (await q.createSnapshot()).snapshotId;
  const baseCapture = join(CACHE, base);
  const baseSrc = await captureSource(baseCapture);
  const fork = new Map<number, { node: number[]; raw: number[] }>();
  for (const k of [1, 4, 16]) {
    const r = { node: [] as number[], raw: [] as number[] };
    for (let rep = 0; rep < FORK_REPS; rep++) {
      let children: string[] = [];
      r.node.push(
        await timeMs(async () => {
          const res = await api('POST', `/sandboxes/${q.sandboxId}/fork`, { count: k });
          if (res.status !== 201) throw new Error(`fork: ${res.status} ${JSON.stringify(res.json)}`);
          const items = res.json as unknown as { sandbox?: { sandboxID: string }; error?: unknown }[];
          const failed = items.filter((x) => !x.sandbox);
          if (failed.length) throw new Error(`fork: ${JSON.stringify(failed[0])}`);
          children = items.map((x) => x.sandbox!.sandboxID);
          await Promise.all(children.map(healthyThroughNode));
        }),
      );
      await Promise.all(children.map((id) => api('DELETE', `/sandboxes/${id}`)));
      // Bare: networks and bundles prepared beforehand; timed from `runsc restore` to all healthy.
      const nets: TestNet[] = Array.from({ length: k }, () => createTestNet());
      const bundles = await Promise.all(nets.map((n) => bare.bundle(n, baseSrc.source, baseSrc.resources)));
      r.raw.push(
        await timeMs(() =>
          Promise.all(
            bundles.map(async (b, i) => {
              await bare.launch([
                'restore',
                '--image-path',
                baseCapture,
                '--bundle',
                b.dir,
                '--detach',
                b.id,
              ]);
              await bare.healthy(nets[i]!);
            }),
          ),
        ),
      );
      await Promise.all(bundles.map((b) => bare.kill(b.id)));
      for (const n of nets) n.destroy();
    }
    fork.set(k, r);
  }
  await q.kill();

  // 5. Restore (create from a snapshot) with the runtime cache cold vs warm. The node restarts
  //    with snapshot.cache_capacity_gb holding one of two snapshots A and B but not both, then
  //    creates alternate A, A, B, B, …: the first of each pair finds its entry evicted (rebuilt
  //    from the repository's chunks), the second finds it cached. Each sample is classified by
  //    whether the entry's directory existed before the create, not by position.
  const pair = [base, quiet.ids[0]!];
  const sizes = await Promise.all(pair.map((id) => dirBytes(join(CACHE, id))));
  const capacity = Math.max(...sizes) + Math.min(...sizes) / 2;
  if (sizes[0]! + sizes[1]! <= capacity) throw new Error('cache capacity would hold both snapshots');
  await stopServer();
  await writeFile(
    join(HOME, 'config.toml'),
    `[snapshot]\ncache_capacity_gb = ${(capacity / 2 ** 30).toFixed(9)}\n`,
  );
  await startNode({ AENV_CONFIG_PATH: join(HOME, 'config.toml') });
  const restore = { cold: [] as number[], warm: [] as number[], capacity, sizes };
  for (let i = 0; i < 2 * ITER; i++) {
    const id = pair[Math.floor(i / 2) % 2]!;
    const cached = existsSync(join(CACHE, id));
    let s: Sandbox | undefined;
    const ms = await timeMs(async () => (s = await Sandbox.create(id)));
    (cached ? restore.warm : restore.cold).push(ms);
    await s!.kill();
  }
  if (!restore.cold.length || !restore.warm.length) throw new Error('no cold or no warm samples');

  return {
    chain,
    quiet: quiet.ms,
    quietGrowth: quiet.growth,
    rawQuiet,
    writing: writing.ms,
    writingGrowth: writing.growth,
    rawWriting,
    rates: { node: nodeRate, raw: rawRate },
    storeBreakdown,
    fork,
    restore,
  };
}

/** A previous run killed hard may have left its home or bare containers. */
async function cleanupLeftovers(): Promise<void> {
  await bare.cleanup();
  await rm(HOME, { recursive: true, force: true });
  await rm(BARE_DIR, { recursive: true, force: true });
}

function report(r: Result): void {
  const MB = 1e6;
  console.log(
    `\nAgentENV snapshot benchmark (${new Date().toISOString()}, runsc ${host.runscVersion}, ` +
      `${ITER} snapshots per case, ${FORK_REPS} forks per size)\n`,
  );
  line('snapshot, quiet vs raw checkpoint', r.quiet, r.rawQuiet);
  line(`snapshot, writing vs raw checkpoint`, r.writing, r.rawWriting);
  console.log(
    `  writer rate over the snapshot loop: node ${(r.rates.node / MB).toFixed(1)} MB/s, raw ${(r.rates.raw / MB).toFixed(1)} MB/s (target ${WRITE_MB} MiB/s)`,
  );
  console.log(
    `  vs the seed's 100 ms reference: quiet ${(percentile(r.quiet, 50) / 100).toFixed(2)}x, writing ${(percentile(r.writing, 50) / 100).toFixed(2)}x`,
  );
  console.log(
    `  repository growth per snapshot p50: quiet ${mib(percentile(r.quietGrowth, 50))}, writing ${mib(percentile(r.writingGrowth, 50))}`,
  );
  for (const b of r.storeBreakdown) {
    console.log(
      `  store step alone (${b.what}, ${mib(b.bytes)} capture): into an empty repository ${fmt(b.full)}, all chunks known ${fmt(percentile(b.known, 50))}`,
    );
  }
  for (const [k, f] of r.fork) line(`fork ${k} → all /health vs ${k} raw restores`, f.node, f.raw);
  const fullP50 = percentile(r.chain.full, 50);
  const restP50 = percentile(r.chain.rest, 50);
  const total = r.chain.first + r.chain.rest.reduce((a, b) => a + b, 0);
  const fullTotal = r.chain.full.reduce((a, b) => a + b, 0);
  console.log(
    `chain of 10 captures (1 MiB new file before each): first ${mib(r.chain.first)}, then p50 ${mib(restP50)} ` +
      `(${((100 * restP50) / fullP50).toFixed(1)} % of a full copy, p50 ${mib(fullP50)}); ` +
      `all 10: ${mib(total)} vs ${mib(fullTotal)} as full copies (${((100 * total) / fullTotal).toFixed(1)} %)`,
  );
  line('create from snapshot, cache cold vs warm', r.restore.cold, r.restore.warm);
  console.log(
    `  cold: cache_capacity_gb = ${mib(r.restore.capacity)} holds one of two snapshots (${r.restore.sizes.map(mib).join(', ')}), ` +
      `creates alternate A A B B …; ${r.restore.cold.length} cold / ${r.restore.warm.length} warm samples ` +
      `(cold = the entry's directory was absent before the create). The repository's files stay in the OS page cache.`,
  );
}

await runBench(async () => report(await main()), { server: () => server, cleanup });
