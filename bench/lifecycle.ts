/**
 * Lifecycle benchmark (issue #12): create (warm pool on and off), pause, resume, kill, snapshot of
 * a quiet sandbox and of one writing 30 MB/s (how long the source is held, and the API answer),
 * and fork into 1/4/16 children until all answer, through a real aenv-server and the E2B SDK;
 * next to bare runsc doing the same runtime work on the same captures in the same run.
 *
 * Its node shares nothing with the tests: with `--helper H` (default 7) port 19H00, home
 * /var/lib/aenv-hH/lifecycle (the base rootfs layer is borrowed read-only from the test home),
 * runtime dir /run/aenv-hH/lifecycle, network tag hH in 10.(110+H).0.0/17; the bare sandboxes use
 * 10.(110+H).128.0/17 and cgroup aenv-hH-bare. The same work done the way a user would without
 * AgentENV, with Docker and runsc (bench/docker-lab.ts), runs in a private engine under
 * /var/lib/aenv-hH/lifecycle-docker with cgroup aenv-hH-docker, while the node idles; it is on by
 * default where dockerd exists (`--no-docker` skips it) and shown as node ÷ docker. Everything is
 * removed at the end, also on failure or Ctrl-C.
 *
 * Run as root: npx tsx bench/lifecycle.ts [--iter 10] [--fork-reps 3] [--pool 2] [--helper 7]
 * [--only fork|pause|pool|snapshot] [--docker | --no-docker]   (~6 min; `--only fork` measures the
 * forks and their baseline alone, ~1 min; `--only pause` the pauses, the pause window and their
 * baseline, ~1 min; `--only pool` creates with the pool off, with a volume and from the pool,
 * ~1 min; `--only snapshot` the snapshots of a quiet and a writing sandbox and their baseline,
 * ~1 min; each with its Docker rows)
 */
import { mkdir, rm } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Sandbox, Volume } from 'e2b';
import { ENVD_PORT } from '@agentenv/protocol';
import { inspectGvisorHost } from '@agentenv/node';
import { api, startServer, useSdkEnv, type TestServer } from '@agentenv/test-support/server';
import { destroyAllTestNets } from '@agentenv/test-support/runtime';
import { templateCapture } from './bare-runsc.js';
import { borrowBaseRootfs, poolFull, runBench, stopBenchServer } from './bench-node.js';
import {
  DOCKER_OPTIONS,
  DockerLab,
  dockerWanted,
  type DockerLifecycle,
  type DockerMeasure,
} from './docker-lab.js';
import { BareLab, FORK_SIZES, GAP_PROBE, WRITER, flushDisk, type SnapshotFloor } from './lifecycle-bare.js';
import { cleanupOnSignals, leftBehind } from './leftovers.js';
import { percentile, timeMs } from './stats.js';

const { values } = parseArgs({
  options: {
    iter: { type: 'string', default: '10' },
    'fork-reps': { type: 'string', default: '3' },
    pool: { type: 'string', default: '2' },
    helper: { type: 'string', default: '7' },
    only: { type: 'string' },
    ...DOCKER_OPTIONS,
  },
});
if (values.only !== undefined && !['fork', 'pause', 'pool', 'snapshot'].includes(values.only))
  throw new Error('--only takes: fork, pause, pool, snapshot');
const ONLY_FORK = values.only === 'fork';
const ONLY_PAUSE = values.only === 'pause';
const ONLY_POOL = values.only === 'pool';
const ONLY_SNAPSHOT = values.only === 'snapshot';
const ITER = Number(values.iter);
const FORK_REPS = Number(values['fork-reps']);
const POOL = Number(values.pool);

const HELPER = Number(values.helper);
if (!Number.isInteger(HELPER) || HELPER < 1 || HELPER > 99) throw new Error('--helper takes 1 to 99');
const PORT = 19000 + HELPER * 100;
const URL_BASE = `http://127.0.0.1:${PORT}`;
const TAG = `h${HELPER}`;
const HOME = `/var/lib/aenv-${TAG}/lifecycle`;
const RUNTIME = `/run/aenv-${TAG}/lifecycle`;
const NET_PREFIX = `10.${110 + HELPER}`;
const ENV = {
  API_ADDR: `127.0.0.1:${PORT}`,
  AENV_HOME_PATH: HOME,
  AENV_RUNTIME_PATH: RUNTIME,
  AENV_NETWORK_NODE_TAG: TAG,
  AENV_NETWORK_HOST_RANGE: `${NET_PREFIX}.0.0/17`,
};
const LONG = { timeoutMs: 3_600_000 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const inspected = await inspectGvisorHost();
if ('problem' in inspected) throw new Error(inspected.problem);
const host = inspected;
const lab = new BareLab(host, `${RUNTIME}-bare`, `aenv-${TAG}-bare`, NET_PREFIX);
const dockerLab = dockerWanted(values)
  ? new DockerLab(host, `${HOME}-docker`, `aenv-${TAG}-docker`)
  : undefined;
let server: TestServer | undefined;

async function startNode(pool: number): Promise<void> {
  server = await startServer({ ...ENV, AENV_POOL_SIZE: String(pool) });
  useSdkEnv(URL_BASE);
}

async function stopNode(): Promise<void> {
  if (!server) return;
  await stopBenchServer(server);
  server = undefined;
}

let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await stopNode().catch((e: unknown) => console.error('stopping the node:', e));
  await lab.cleanup().catch((e: unknown) => console.error('bare runsc cleanup:', e));
  await dockerLab?.stop().catch((e: unknown) => console.error('docker cleanup:', e));
  destroyAllTestNets();
  for (const d of [HOME, RUNTIME, `${RUNTIME}-bare`]) await rm(d, { recursive: true, force: true });
  const left = leftBehind([`aenv-${TAG}-`, `aenvtest-${process.pid}-`], [HOME, RUNTIME, `${HOME}-docker`]);
  if (left.length) console.error(`left behind:\n${left.join('\n')}`);
}
cleanupOnSignals(cleanup);

// ------------------------------------------------------------------ through the node

interface Row {
  name: string;
  node: number[];
  base?: number[];
  baseName?: string;
  /** The same work done with Docker and runsc, and what that is. */
  docker?: DockerMeasure;
  dockerName?: string;
}
const rows: Row[] = [];

/** A row's Docker columns, when Docker measured `m`. */
const dockerCols = (m: DockerMeasure | undefined, dockerName: string) => (m ? { docker: m, dockerName } : {});

/** The largest pause a probe process inside the sandbox saw since the last call, in ms. */
async function heldMs(sbx: Sandbox): Promise<number> {
  // touch creates the file in one step (files.write would still be setting its metadata when the
  // probe removes it).
  await sbx.commands.run('rm -f /tmp/aenv-gap; touch /tmp/aenv-gap-reset');
  for (;;) {
    const text = await sbx.files.read('/tmp/aenv-gap').catch(() => '');
    if (text) return Number(text) * 1000;
    await sleep(5);
  }
}

async function startProbe(sbx: Sandbox, writer: boolean): Promise<void> {
  await sbx.files.write('/tmp/aenv-gap.py', GAP_PROBE);
  await sbx.commands.run('nohup python3 /tmp/aenv-gap.py >/dev/null 2>&1 &');
  if (writer) {
    await sbx.files.write('/tmp/aenv-writer.py', WRITER);
    await sbx.commands.run('nohup python3 /tmp/aenv-writer.py >/dev/null 2>&1 &');
  }
  await sleep(2000);
  await heldMs(sbx);
}

async function childAnswers(id: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`${URL_BASE}/health`, {
      headers: { 'e2b-sandbox-id': id, 'e2b-sandbox-port': String(ENVD_PORT) },
    }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`child ${id} does not answer through the node`);
    await sleep(10);
  }
}

async function createKill(
  opts: Parameters<typeof Sandbox.create>[0] = {},
): Promise<{ create: number[]; kill: number[] }> {
  const create: number[] = [];
  const kill: number[] = [];
  for (let i = 0; i < ITER; i++) {
    let s: Sandbox | undefined;
    create.push(await timeMs(async () => (s = await Sandbox.create(opts))));
    kill.push(await timeMs(() => s!.kill()));
  }
  return { create, kill };
}

/** Creates that mount a volume: the pool is skipped, the template's ready state restored. */
async function volumeRow(poolOff: number[]): Promise<void> {
  const vol = await Volume.create(`bench-${Date.now().toString(36)}`);
  try {
    const { create } = await createKill({ volumeMounts: { '/data': vol } });
    rows.push({ name: 'create with a volume', node: create, base: poolOff, baseName: 'create, pool off' });
  } finally {
    await Volume.destroy(vol.volumeId);
  }
}

async function pauseResume(): Promise<{ pause: number[]; resume: number[] }> {
  const sbx = await Sandbox.create(LONG);
  const pause: number[] = [];
  const resume: number[] = [];
  for (let i = 0; i < ITER; i++) {
    await sbx.commands.run(`echo ${i} > /tmp/step`);
    pause.push(await timeMs(() => sbx.pause()));
    resume.push(await timeMs(() => Sandbox.connect(sbx.sandboxId, LONG)));
  }
  await sbx.kill();
  return { pause, resume };
}

/**
 * The pause window: how long after a pause answered its capture is in the snapshot repository
 * (GET says `pauseStored`), and a pause asked to answer only then (`?wait=stored`).
 */
async function pauseWindow(): Promise<{ window: number[]; waitStored: number[]; resumeStored: number[] }> {
  const sbx = await Sandbox.create(LONG);
  const window: number[] = [];
  const waitStored: number[] = [];
  // A resume with nothing of its pause still running on the node (its upload ended).
  const resumeStored: number[] = [];
  const resume = async () => resumeStored.push(await timeMs(() => Sandbox.connect(sbx.sandboxId, LONG)));
  const stored = async () => (await api('GET', `/sandboxes/${sbx.sandboxId}`)).json.pauseStored === true;
  for (let i = 0; i < ITER; i++) {
    await sbx.commands.run(`echo ${i} > /tmp/step`);
    await sbx.pause();
    window.push(
      await timeMs(async () => {
        while (!(await stored())) await sleep(2);
      }),
    );
    await resume();
    await sbx.commands.run(`echo ${i} > /tmp/step`);
    waitStored.push(
      await timeMs(async () => {
        const r = await api('POST', `/sandboxes/${sbx.sandboxId}/pause?wait=stored`);
        if (r.status !== 204 || r.headers.get('x-aenv-pause-stored') !== 'true')
          throw new Error(`pause?wait=stored: ${r.status} ${JSON.stringify(r.json)}`);
      }),
    );
    await resume();
  }
  await sbx.kill();
  return { window, waitStored, resumeStored };
}

/** Pause, resume (against a bare restore when measured) and the pause window. */
async function pauseRows(
  bareCheckpoint: number[],
  bareRestore?: number[],
  docker?: DockerLifecycle,
): Promise<void> {
  const pr = await pauseResume();
  rows.push({
    name: 'pause',
    node: pr.pause,
    base: bareCheckpoint,
    baseName: 'runsc checkpoint',
    ...dockerCols(docker?.checkpoint, 'docker checkpoint create'),
  });
  const restoreBase = bareRestore && { base: bareRestore, baseName: 'runsc restore → envd' };
  rows.push({
    name: 'resume',
    node: pr.resume,
    ...restoreBase,
    ...dockerCols(docker?.restore, 'docker start --checkpoint + exec'),
  });
  const w = await pauseWindow();
  rows.push({ name: 'resume once the pause is stored', node: w.resumeStored, ...restoreBase });
  rows.push({ name: 'pause: stored after the answer (window)', node: w.window });
  rows.push({
    name: 'pause?wait=stored',
    node: w.waitStored,
    base: bareCheckpoint,
    baseName: 'runsc checkpoint',
  });
}

/**
 * Snapshots through the SDK: how long the source is held, the answer (once this node can start
 * from it), and how long after the answer the repository holds it (GET says `stored`), which each
 * iteration waits for so that stores do not pile up; `everyMs` is the pace they were taken at.
 */
async function snapshots(writer: boolean): Promise<NodeSnapshots> {
  await flushDisk();
  const sbx = await Sandbox.create(LONG);
  await startProbe(sbx, writer);
  await sleep(1000);
  const idle = await heldMs(sbx);
  const apiMs: number[] = [];
  const held: number[] = [];
  const stored: number[] = [];
  const started = Date.now();
  for (let i = 0; i < ITER; i++) {
    await heldMs(sbx);
    let id = '';
    apiMs.push(await timeMs(async () => (id = (await sbx.createSnapshot()).snapshotId)));
    stored.push(
      await timeMs(async () => {
        while ((await api('GET', `/snapshots/${id}`)).json.stored !== true) await sleep(2);
      }),
    );
    held.push(await heldMs(sbx));
    await sleep(300);
  }
  const everyMs = (Date.now() - started) / ITER;
  await sbx.kill();
  return { api: apiMs, held, stored, idle, everyMs };
}

interface NodeSnapshots {
  api: number[];
  held: number[];
  stored: number[];
  idle: number;
  everyMs: number;
}

/** The node's snapshots of a quiet and of a writing sandbox, then their floor at the same pace. */
async function snapshotMeasures(template: string, docker?: DockerMeasure) {
  const quiet = await snapshots(false);
  const busy = await snapshots(true);
  await flushDisk();
  const floor = await lab.measureSnapshots(template, ITER, { quiet: quiet.everyMs, writing: busy.everyMs });
  snapshotRows('quiet', quiet, floor.quiet, docker);
  snapshotRows('writing 32 MB/s', busy, floor.writing);
  return { idleQuiet: quiet.idle, idleBusy: busy.idle, everyMs: [quiet.everyMs, busy.everyMs] };
}

function snapshotRows(what: string, r: NodeSnapshots, floor: SnapshotFloor, docker?: DockerMeasure): void {
  const base = { base: floor.kept, baseName: 'checkpoint --leave-running, image kept' };
  rows.push({ name: `snapshot ${what}: held`, node: r.held, ...base });
  rows.push({
    name: `snapshot ${what}: API answer`,
    node: r.api,
    ...base,
    ...dockerCols(docker, 'docker checkpoint create --leave-running'),
  });
  rows.push({
    name: `snapshot ${what}: API answer`,
    node: r.api,
    base: floor.deleted,
    baseName: 'checkpoint --leave-running, image deleted at once',
  });
  rows.push({ name: `snapshot ${what}: stored after the answer`, node: r.stored });
}

async function forks(k: number, parent: Sandbox): Promise<number[]> {
  const out: number[] = [];
  for (let rep = 0; rep < FORK_REPS; rep++) {
    let children: string[] = [];
    out.push(
      await timeMs(async () => {
        const res = await api('POST', `/sandboxes/${parent.sandboxId}/fork`, { count: k });
        if (res.status !== 201) throw new Error(`fork: ${res.status} ${JSON.stringify(res.json)}`);
        const items = res.json as unknown as { sandbox?: { sandboxID: string }; error?: unknown }[];
        const failed = items.find((x) => !x.sandbox);
        if (failed) throw new Error(`fork: ${JSON.stringify(failed)}`);
        children = items.map((x) => x.sandbox!.sandboxID);
        await Promise.all(children.map(childAnswers));
      }),
    );
    await Promise.all(children.map((id) => api('DELETE', `/sandboxes/${id}`)));
  }
  return out;
}

async function poolCreates(): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < ITER; i++) {
    // A rollout's steps leave the pool time to refill; wait until it has.
    await poolFull(URL_BASE, POOL);
    let s: Sandbox | undefined;
    out.push(await timeMs(async () => (s = await Sandbox.create())));
    await s!.kill();
  }
  return out;
}

/** Creates from the pool (its sandboxes wait frozen) on a node restarted with one. */
async function poolRow(restore?: number[], dockerCreate?: DockerMeasure): Promise<void> {
  await stopNode();
  await startNode(POOL);
  rows.push({
    name: `create, pool ${POOL}`,
    node: await poolCreates(),
    ...(restore ? { base: restore, baseName: 'runsc restore → envd' } : {}),
    ...dockerCols(dockerCreate, DOCKER_CREATE),
  });
}

async function forkRows(baseline: Map<number, number[]>, docker?: DockerLifecycle): Promise<void> {
  const parent = await Sandbox.create(LONG);
  for (const k of FORK_SIZES) {
    rows.push({
      name: `fork ×${k} until all answer`,
      node: await forks(k, parent),
      base: baseline.get(k),
      baseName: `${k} restores in parallel`,
      ...dockerCols(docker?.parallel?.get(k), `${k} × (docker run + exec) in parallel`),
    });
  }
  await parent.kill();
}

// ------------------------------------------------------------------ with Docker and runsc

const DOCKER_CREATE = 'docker run + exec';
/** Why the Docker part could not run, for the report. */
let dockerProblem: string | undefined;

/**
 * The Docker side of the rows `parts` names, measured while the node idles with no sandbox (like
 * the bare side): its engine is started for it and removed again.
 */
async function dockerMeasure(
  template: string,
  parts: Parameters<DockerLab['lifecycle']>[2],
): Promise<DockerLifecycle | undefined> {
  if (!dockerLab) return undefined;
  try {
    await dockerLab.start(template);
    return await dockerLab.lifecycle(ITER, FORK_REPS, parts);
  } catch (e) {
    dockerProblem = `${String(e)}\ndockerd's output:\n${dockerLab.output().slice(-2000)}`;
    return undefined;
  } finally {
    await dockerLab.stop();
  }
}

// ------------------------------------------------------------------ run and report

async function main(): Promise<void> {
  await lab.cleanup();
  await rm(HOME, { recursive: true, force: true });
  await mkdir(HOME, { recursive: true });
  await borrowBaseRootfs(HOME);
  await startNode(0);
  await (await Sandbox.create()).kill(); // the base template's ready state, in HOME
  const template = await templateCapture(HOME);

  if (ONLY_FORK) {
    const docker = await dockerMeasure(template, { parallel: FORK_SIZES });
    await forkRows(await lab.measureForks(template, FORK_REPS), docker);
    await stopNode();
    report();
    return;
  }
  if (ONLY_PAUSE) {
    const plain = await lab.measureCheckpointStop(template, ITER);
    // Whether runsc's own options make the floor itself cheaper.
    for (const flag of ['--direct', '--exclude-committed-zero-pages']) {
      const ms = await lab.measureCheckpointStop(template, ITER, [flag]);
      rows.push({
        name: `bare runsc checkpoint ${flag}`,
        node: ms,
        base: plain,
        baseName: 'runsc checkpoint',
      });
    }
    await pauseRows(plain, undefined, await dockerMeasure(template, { pause: true }));
    await stopNode();
    report();
    return;
  }
  if (ONLY_POOL) {
    const docker = await dockerMeasure(template, { create: true });
    const poolOff = (await createKill()).create;
    rows.push({ name: 'create, pool off', node: poolOff, ...dockerCols(docker?.create, DOCKER_CREATE) });
    await volumeRow(poolOff);
    await poolRow(undefined, docker?.create);
    report();
    return;
  }
  if (ONLY_SNAPSHOT) {
    const docker = await dockerMeasure(template, { snapshot: true });
    report(await snapshotMeasures(template, docker?.checkpointLeaveRunning));
    return;
  }
  const bare = await lab.measure(template, ITER, FORK_REPS);
  const docker = await dockerMeasure(template, {
    create: true,
    pause: true,
    snapshot: true,
    parallel: FORK_SIZES,
  });
  const ck = await createKill();
  rows.push({
    name: 'create, pool off',
    node: ck.create,
    base: bare.restore,
    baseName: 'runsc restore → envd',
    ...dockerCols(docker?.create, DOCKER_CREATE),
  });
  await volumeRow(ck.create);
  await pauseRows(bare.checkpointStop, bare.restorePaused, docker);
  rows.push({
    name: 'kill',
    node: ck.kill,
    base: bare.delete,
    baseName: 'runsc delete --force',
    ...dockerCols(docker?.kill, 'docker rm -f'),
  });
  const snap = await snapshotMeasures(template, docker?.checkpointLeaveRunning);
  await forkRows(bare.forks, docker);
  await poolRow(bare.restore, docker?.create);
  report({ ...snap, deleteUnreaped: bare.deleteUnreaped });
}

function report(notes?: {
  idleQuiet: number;
  idleBusy: number;
  everyMs: number[];
  deleteUnreaped?: number[];
}): void {
  const f = (ms: number | undefined) => (ms === undefined ? '' : ms < 10 ? ms.toFixed(1) : ms.toFixed(0));
  console.log(
    `\nAgentENV lifecycle benchmark (${new Date().toISOString()}, runsc ${host.runscVersion}, ` +
      `${ITER} samples per case, ${FORK_REPS} forks per size; ms)\n`,
  );
  const withDocker = rows.some((r) => r.docker);
  console.log(
    '| case | p50 | p95 | baseline | baseline p50 | ratio |' +
      (withDocker ? ' docker + runsc | docker p50 | node ÷ docker |' : ''),
  );
  console.log('|---|---|---|---|---|---|' + (withDocker ? '---|---|---|' : ''));
  const failures: string[] = [];
  for (const r of rows) {
    const p50 = percentile(r.node, 50);
    const b50 = r.base?.length ? percentile(r.base, 50) : undefined;
    const d = r.docker;
    let docker = '';
    if (d && 'failed' in d) {
      failures.push(`${r.dockerName}: ${d.failed}`);
      docker = ` ${r.dockerName}: fails (below) | | |`;
    } else if (withDocker) {
      const d50 = d?.ms.length ? percentile(d.ms, 50) : undefined;
      docker = ` ${r.dockerName ?? ''} | ${f(d50)} | ${d50 ? (p50 / d50).toFixed(2) + '×' : ''} |`;
    }
    console.log(
      `| ${r.name} | ${f(p50)} | ${f(percentile(r.node, 95))} | ${r.baseName ?? ''} | ${f(b50)} | ${b50 ? (p50 / b50).toFixed(2) + '×' : ''} |${docker}`,
    );
  }
  if (withDocker) {
    console.log(
      "\ndocker + runsc: a private dockerd with runsc as its runtime (the node's runsc flags), containers " +
        "running `sleep infinity` in an image of the base template's root filesystem, `--network none`.",
    );
  }
  for (const line of [...new Set(failures)]) console.log(`docker failed: ${line}`);
  if (dockerProblem) console.log(`\nno Docker rows: ${dockerProblem}`);
  if (!notes) return;
  console.log(
    `\nheld = the longest stall a 1 ms probe loop inside the sandbox saw during the call ` +
      `(with no snapshot: ${f(notes.idleQuiet)} ms quiet, ${f(notes.idleBusy)} ms writing); the bare checkpoints ` +
      `run the same probe (and writer), the kept ones at the node's pace (one every ${notes.everyMs.map(f).join(' / ')} ms, ` +
      `quiet / writing). Bare sandboxes run under aenv-reaper like the node's` +
      (notes.deleteUnreaped
        ? `; runsc delete of one re-parented to PID 1 instead: p50 ${f(percentile(notes.deleteUnreaped, 50))} ms.`
        : '.'),
  );
}

await runBench(main, { server: () => server, cleanup });
