/**
 * Density benchmark (issues #12, #25): what idle sandboxes cost and how creates hold up as they
 * pile up.
 *
 * 1. Driver level (GvisorDriver on the node's template capture): idle CPU of 20 restored
 *    sandboxes, as they are, frozen (cgroup freezer), and pinned one CPU each (cpuset); PSS per
 *    idle sandbox.
 * 2. Through a real aenv-server with its defaults (warm pool of 2, admission, max_sandboxes) and
 *    the E2B SDK: once the node's idle freeze (`idle_freeze_secs`, default 10 s) has frozen 20
 *    sandboxes and the pool waits frozen, the CPU of the node process, its helper processes, the
 *    sandboxes with the pool (their cgroups' cpuacct) and the whole machine, also less what it
 *    used over a window before the node started and this bench's own process; PSS per idle
 *    sandbox; then create p50 (`--creates` of them, each from a full warm pool and killed
 *    again) with 0, 50, 100, 200 and 500 idle sandboxes held, once the idle freeze has frozen
 *    them all, against the empty node's, with
 *    MemAvailable used per held sandbox; at each step also the node's own part of a create (its
 *    `aenv_lifecycle_stage_duration_seconds` for create), its process's CPU over the creates and
 *    its event-loop delay. `--merge-pages` runs the node with `runtime.merge_pages` (KSM) and
 *    reads memory once it has merged.
 * 3. The same the way a user would without AgentENV (bench/docker-lab.ts), measured between 1
 *    and 2: 20 containers of Docker with runsc, idle, then `docker pause`d: their cgroups' CPU,
 *    dockerd's and the rest of the engine's, the whole machine; PSS and MemAvailable per
 *    container. On by default where dockerd exists; `--no-docker` skips it. A table then puts
 *    the node, the driver-level floor and Docker side by side (node ÷ docker).
 *
 * CPU is in % of one core. Its node: port 19701, home /var/lib/aenv-h7/density, runtime
 * /run/aenv-h7/density, tag h7 in 10.117.0.0/17 (driver-level sandboxes in 10.117.128.0/17);
 * Docker's engine under /var/lib/aenv-h7/density-docker, its containers in cgroup aenv-h7-docker.
 *
 * Run as root: npx tsx bench/density.ts [--steps 0,50,100,200,500] [--window 30] [--idle 20]
 * [--creates 10] [--merge-pages] [--docker | --no-docker]
 */
import { mkdir, readFile, readdir, rm } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Sandbox } from 'e2b';
import { GvisorDriver, inspectGvisorHost, type SandboxHandle } from '@agentenv/node';
import { startServer, useSdkEnv, type TestServer } from '@agentenv/test-support/server';
import { createTestNet, destroyAllTestNets } from '@agentenv/test-support/runtime';
import { templateCapture } from './bare-runsc.js';
import { borrowBaseRootfs, delta, poolFull, runBench, scrape } from './bench-node.js';
import { cgroupCpuSecs, cpuOver, descendants, machineBusySecs, processCpuSecs } from './host-cpu.js';
import { DOCKER_OPTIONS, DockerLab, dockerWanted } from './docker-lab.js';
import { cleanupOnSignals, leftBehind } from './leftovers.js';
import { percentile, timeMs } from './stats.js';

const { values } = parseArgs({
  options: {
    steps: { type: 'string', default: '0,50,100,200,500' },
    window: { type: 'string', default: '30' },
    idle: { type: 'string', default: '20' },
    creates: { type: 'string', default: '10' },
    'merge-pages': { type: 'boolean', default: false },
    ...DOCKER_OPTIONS,
  },
});
const STEPS = values.steps.split(',').map(Number);
const WINDOW_MS = Number(values.window) * 1000;
const IDLE = Number(values.idle);
const CREATES = Number(values.creates);
const MERGE = values['merge-pages'];

const PORT = 19701;
const URL = `http://127.0.0.1:${PORT}`;
/** The node's default warm pool, which the bench keeps. */
const POOL = 2;
const HOME = '/var/lib/aenv-h7/density';
const RUNTIME = '/run/aenv-h7/density';
const TAG = 'h7';
const NODE_CGROUP = `aenv-${TAG}`;
const DRIVER_CGROUP = 'aenv-h7-density';
const RES = { cpuCount: 1, memoryMB: 512, diskSizeMB: 512 };
const LONG = { timeoutMs: 3_600_000 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;
const pct = (v: number) => `${v.toFixed(2)} %`;
const DOCKER_DIR = `${HOME}-docker`;
const DOCKER_CGROUP = `aenv-${TAG}-docker`;

/**
 * What the idle sandboxes (or containers) cost, for the side-by-side table: CPU in % of one core
 * (their own, what manages them, the two together, the whole machine), memory per idle one.
 */
interface Figures {
  own?: number;
  manager?: number;
  all?: number;
  machine?: number;
  /** The whole machine less what it used before the node started and this bench's own process. */
  added?: number;
  pss?: number;
  mem?: number;
}

// ------------------------------------------------------------------ host measurements

async function children(cgroupParent: string): Promise<string[]> {
  const dir = `/sys/fs/cgroup/cpuacct/${cgroupParent}`;
  return (await readdir(dir, { withFileTypes: true }).catch(() => []))
    .filter((e) => e.isDirectory())
    .map((e) => e.name);
}

async function cpuNs(cgroupParent: string, ids: readonly string[]): Promise<number> {
  let n = 0;
  for (const id of ids) {
    n += Number(
      await readFile(`/sys/fs/cgroup/cpuacct/${cgroupParent}/${id}/cpuacct.usage`, 'utf8').catch(() => '0'),
    );
  }
  return n;
}

/** CPU the sandboxes use over the window, in % of one core (total). */
async function idleCpu(cgroupParent: string, ids: readonly string[]): Promise<number> {
  const a = await cpuNs(cgroupParent, ids);
  const t = performance.now();
  await sleep(WINDOW_MS);
  const b = await cpuNs(cgroupParent, ids);
  return (100 * (b - a)) / ((performance.now() - t) * 1e6);
}

/**
 * The PSS of the processes in cgroup `cgroupParent/id`, found in `controller`'s hierarchy (runsc
 * under Docker nests a container's memory cgroup below the engine's own, so there it is found
 * by cpuacct).
 */
async function pss(cgroupParent: string, id: string, controller = 'memory'): Promise<number> {
  const procs = await readFile(
    `/sys/fs/cgroup/${controller}/${cgroupParent}/${id}/cgroup.procs`,
    'utf8',
  ).catch(() => '');
  let kb = 0;
  for (const pid of procs.split('\n').filter(Boolean)) {
    const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
    kb += Number(/^Pss:\s+(\d+)/m.exec(text)?.[1] ?? 0);
  }
  return kb * 1024;
}

async function memAvailable(): Promise<number> {
  return Number(/^MemAvailable:\s+(\d+)/m.exec(await readFile('/proc/meminfo', 'utf8'))?.[1] ?? 0) * 1024;
}

async function frozen(cgroupParent: string, id: string): Promise<boolean> {
  const state = await readFile(`/sys/fs/cgroup/freezer/${cgroupParent}/${id}/freezer.state`, 'utf8').catch(
    () => '',
  );
  return state.trim() === 'FROZEN';
}

/** Waits until the node's idle freeze has frozen every one of `ids` (or gives up after a minute). */
async function allFrozen(cgroupParent: string, ids: readonly string[]): Promise<number> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    const n = (await Promise.all(ids.map((id) => frozen(cgroupParent, id)))).filter(Boolean).length;
    if (n === ids.length || performance.now() > deadline) return n;
    await sleep(1000);
  }
}

// ------------------------------------------------------------------ 1. driver level

const lines: string[] = [];
const say = (l: string) => {
  lines.push(l);
  console.log(l);
};

/** Driver-level sandboxes as they are and frozen: the floor of the side-by-side table. */
async function driverLevel(capture: string): Promise<{ running: Figures; frozen: Figures }> {
  const floor = { running: {} as Figures, frozen: {} as Figures };
  for (const placement of ['none', 'spread'] as const) {
    const driver = new GvisorDriver({
      runtimeDir: `${RUNTIME}-driver-${placement}`,
      cgroupParent: DRIVER_CGROUP,
      cpuPlacement: placement,
    });
    const hs: SandboxHandle[] = [];
    try {
      for (let i = 0; i < IDLE; i++) {
        hs.push(
          await driver.restore({
            capture,
            resources: RES,
            net: createTestNet({ prefix: '10.117', firstThird: 128 }),
          }),
        );
      }
      await sleep(3000);
      const ids = hs.map((h) => h.id);
      const running = await idleCpu(DRIVER_CGROUP, ids);
      const label = placement === 'spread' ? ', one CPU each (cpuset)' : '';
      say(
        `driver: ${IDLE} idle sandboxes${label}: ${running.toFixed(2)} % of one core (${(running / IDLE).toFixed(3)} % each)`,
      );
      if (placement === 'none') {
        const sizes = await Promise.all(ids.map((id) => pss(DRIVER_CGROUP, id)));
        say(
          `driver: PSS per idle sandbox p50 ${mib(percentile(sizes, 50))} (p95 ${mib(percentile(sizes, 95))})`,
        );
        for (const h of hs) await driver.freeze(h);
        const frozen = await idleCpu(DRIVER_CGROUP, ids);
        floor.running = { own: running, pss: percentile(sizes, 50) };
        floor.frozen = { own: frozen, pss: percentile(sizes, 50) };
        say(`driver: ${IDLE} frozen sandboxes: ${frozen.toFixed(3)} % of one core`);
        const thaw = await Promise.all(hs.map((h) => timeMs(() => driver.thaw(h))));
        say(`driver: thaw p50 ${percentile(thaw, 50).toFixed(1)} ms`);
      }
    } finally {
      await driver.close();
      destroyAllTestNets();
    }
  }
  return floor;
}

// ------------------------------------------------------------------ 2. through the node

/**
 * With --merge-pages, waits until the node has stopped ksmd again (every sandbox merged; up to 30
 * minutes, saying how far it got), so that memory is read once merging is done.
 */
async function merged(): Promise<void> {
  if (!MERGE) return;
  const ksm = (f: string) => readFile(`/sys/kernel/mm/ksm/${f}`, 'utf8').then((t) => t.trim());
  const t0 = Date.now();
  for (let s = 1; (await ksm('run')) !== '0' && s <= 1800; s++) {
    if (s % 30 === 0)
      console.error(
        `ksmd merging: ${await ksm('full_scans')} full scans, ${await ksm('pages_sharing')} pages sharing`,
      );
    await sleep(1000);
  }
  say(
    `node: page merging took ${((Date.now() - t0) / 1000).toFixed(0)} s more; ${await ksm('pages_sharing')} pages sharing`,
  );
}

/** The node's helper processes (its spawner, …): its descendants outside the sandboxes' cgroups. */
async function helpersOf(pid: number): Promise<number[]> {
  const out: number[] = [];
  for (const p of await descendants(pid)) {
    const cg = await readFile(`/proc/${p}/cgroup`, 'utf8').catch(() => '');
    if (!cg.includes(`/${NODE_CGROUP}/`)) out.push(p);
  }
  return out;
}

/**
 * What idling costs with `ids` held and the pool full, all frozen: the node process, its helpers,
 * the sandboxes with the pool (their cgroups), and the whole machine (other work on it included).
 */
async function idleCost(nodePid: number, ids: readonly string[]): Promise<Figures> {
  const all = await heldAndPooled();
  const n = await allFrozen(NODE_CGROUP, all);
  const helpers = await helpersOf(nodePid);
  const cpu = await cpuOver(WINDOW_MS, {
    node: () => processCpuSecs(nodePid),
    helpers: async () => (await Promise.all(helpers.map(processCpuSecs))).reduce((a, b) => a + b, 0),
    sandboxes: () => cgroupCpuSecs(NODE_CGROUP),
    machine: machineBusySecs,
    bench: () => processCpuSecs(process.pid),
  });
  const added = cpu.machine - machineBefore - cpu.bench;
  const ours = cpu.node + cpu.helpers + cpu.sandboxes;
  say(
    `node: ${ids.length} idle sandboxes + ${all.length - ids.length} in the pool, ${n} of ${all.length} frozen, over ${WINDOW_MS / 1000} s (% of one core):`,
  );
  say(
    `  node process ${pct(cpu.node)}, its helpers ${pct(cpu.helpers)}, sandboxes + pool ${pct(cpu.sandboxes)}`,
  );
  say(`  all of it ${pct(ours)}; whole machine ${pct(cpu.machine)} (anything else running here included)`);
  say(
    `  whole machine less its ${pct(machineBefore)} before the node started and this bench's own ${pct(cpu.bench)}: ${pct(added)}`,
  );
  return { own: cpu.sandboxes, manager: cpu.node + cpu.helpers, all: ours, machine: cpu.machine, added };
}
const heldAndPooled = async () => (await children(NODE_CGROUP)).filter((id) => id.startsWith('aenv-'));

async function nodeLevel(nodePid: number): Promise<Figures> {
  const held: Sandbox[] = [];
  const hold = async (n: number) => {
    while (held.length < n) {
      held.push(await Sandbox.create(LONG));
    }
  };
  const emptyNode = await memAvailable();
  /** Create p50 with `n` idle sandboxes held (each create killed again), as a table row. */
  let firstP50: number | undefined;
  const step = async (n: number) => {
    await hold(n);
    if (n) await merged();
    // Idle means frozen: the last ones created are awake until the idle freeze takes them
    // (idle_freeze_secs), and creates timed beside ~30 awake sandboxes measure those, not the 500.
    const all = await heldAndPooled();
    const frozenNow = await allFrozen(NODE_CGROUP, all);
    if (n)
      say(
        `node, ${held.length} held: ${frozenNow} of ${all.length} sandboxes (the pool's included) frozen before the creates`,
      );
    const perSandbox = n ? mib((emptyNode - (await memAvailable())) / n) : '–';
    const creates: number[] = [];
    const before = await scrape(URL);
    for (let i = 0; i < CREATES; i++) {
      // Each from a full pool, as at every step: otherwise a p50 mixes handouts and restores.
      await poolFull(URL, POOL);
      let s: Sandbox | undefined;
      creates.push(await timeMs(async () => (s = await Sandbox.create())));
      await s!.kill();
    }
    const p50 = percentile(creates, 50);
    firstP50 ??= p50;
    const after = await scrape(URL);
    const launches = delta(after, before, 'aenv_lifecycle_stage_duration_seconds_count{stage="create"}');
    const launchMs =
      (delta(after, before, 'aenv_lifecycle_stage_duration_seconds_sum{stage="create"}') / launches) * 1000;
    say(
      `node, ${held.length} held: the node's own part of a create (pool handout, envd /init, record) ${launchMs.toFixed(1)} ms mean over ${launches}; node process ${pct((delta(after, before, 'aenv_node_process_cpu_seconds_total') / ((after.at - before.at) / 1000)) * 100)} of a core over the creates; event-loop delay p99 ${((after.values.get('aenv_node_nodejs_eventloop_lag_p99_seconds') ?? NaN) * 1000).toFixed(1)} ms`,
    );
    return `| ${held.length} | ${p50.toFixed(0)} ms | ${percentile(creates, 95).toFixed(0)} ms | ${(p50 / firstP50).toFixed(2)}× | ${perSandbox} | ${gib(await memAvailable())} |`;
  };
  try {
    // Steps below IDLE are taken before the idle sandboxes exist, so a 0 step means an empty node.
    const rows: string[] = [];
    for (const n of STEPS.filter((n) => n < IDLE)) rows.push(await step(n));
    await hold(IDLE);
    // The pool refills once each create has answered: the last one's refill may be under way.
    await poolFull(`http://127.0.0.1:${PORT}`, POOL);
    const figures = await idleCost(
      nodePid,
      held.map((s) => s.sandboxId),
    );
    await merged();
    figures.mem = (emptyNode - (await memAvailable())) / IDLE;
    const sizes = await Promise.all((await heldAndPooled()).map((id) => pss(NODE_CGROUP, id)));
    figures.pss = percentile(sizes, 50);
    say(
      `node: PSS per idle sandbox (pool's included) p50 ${mib(percentile(sizes, 50))} (p95 ${mib(percentile(sizes, 95))})`,
    );
    say('');
    say(
      '| idle sandboxes held | create p50 | create p95 | p50 / empty node | MemAvailable used per held sandbox | memory available |',
    );
    say('|---|---|---|---|---|---|');
    for (const r of rows) say(r);
    for (const n of STEPS.filter((n) => n >= IDLE)) say(await step(n));
    return figures;
  } finally {
    for (let i = 0; i < held.length; i += 20) {
      await Promise.all(held.slice(i, i + 20).map((s) => s.kill().catch(() => undefined)));
    }
  }
}

// ------------------------------------------------------------------ 3. with Docker and runsc

/**
 * IDLE containers of Docker with runsc, idle and then `docker pause`d, measured like the node's
 * sandboxes; the engine is started for it and removed again.
 */
async function dockerLevel(lab: DockerLab, capture: string): Promise<{ running: Figures; paused?: Figures }> {
  try {
    await lab.start(capture);
    const before = await memAvailable();
    const ids = await lab.idle(IDLE);
    await sleep(3000);
    const mem = (before - (await memAvailable())) / IDLE;
    const sizes = await Promise.all(ids.map((id) => pss(DOCKER_CGROUP, id, 'cpuacct')));
    say(
      `docker + runsc: PSS per idle container p50 ${mib(percentile(sizes, 50))} (p95 ${mib(percentile(sizes, 95))}), MemAvailable used per container ${mib(mem)}`,
    );
    const running = { ...(await dockerCpu(lab, `${IDLE} idle containers`)), pss: percentile(sizes, 50), mem };
    const paused = await lab.pause(ids).then(
      () => true,
      (e: unknown) =>
        say(`docker + runsc: docker pause fails: ${String(e).split('\n').slice(0, 3).join(' | ')}`),
    );
    return {
      running,
      ...(paused ? { paused: await dockerCpu(lab, `${IDLE} containers after docker pause`) } : {}),
    };
  } finally {
    await lab.stop();
  }
}

/** The containers' CPU (their cgroups), dockerd's, the rest of the engine's and the machine's. */
async function dockerCpu(lab: DockerLab, what: string): Promise<Figures> {
  const dockerd = lab.dockerdPid!;
  const engine = await lab.enginePids();
  const cpu = await cpuOver(WINDOW_MS, {
    containers: () => cgroupCpuSecs(DOCKER_CGROUP),
    dockerd: () => processCpuSecs(dockerd),
    engine: async () => (await Promise.all(engine.map(processCpuSecs))).reduce((a, b) => a + b, 0),
    machine: machineBusySecs,
  });
  const all = cpu.containers + cpu.dockerd + cpu.engine;
  say(`docker + runsc: ${what}, over ${WINDOW_MS / 1000} s (% of one core):`);
  say(
    `  containers ${pct(cpu.containers)}, dockerd ${pct(cpu.dockerd)}, the engine's other ${engine.length} processes (containerd, shims) ${pct(cpu.engine)}`,
  );
  say(`  all of it ${pct(all)}; whole machine ${pct(cpu.machine)} (the idle node included)`);
  return { own: cpu.containers, manager: cpu.dockerd + cpu.engine, all, machine: cpu.machine };
}

const FIGURE_ROWS: readonly (readonly [keyof Figures, string, (v: number) => string])[] = [
  ['own', 'CPU: the sandboxes / containers (their cgroups)', pct],
  ['manager', 'CPU: node process + helpers / dockerd + containerd + shims', pct],
  ['all', 'CPU: all of that', pct],
  ['machine', 'CPU: whole machine', pct],
  ['added', 'CPU: whole machine, less before the node and this bench', pct],
  ['pss', 'PSS per idle one, p50', mib],
  ['mem', 'MemAvailable used per idle one', mib],
];

/** The node, the driver-level floor and Docker with runsc in one table, with node ÷ docker. */
function sideBySide(
  node: Figures,
  floor: { running: Figures; frozen: Figures },
  docker?: { running: Figures; paused?: Figures },
): void {
  const ratio = (a?: number, b?: number) => (a !== undefined && b ? `${(a / b).toFixed(2)}×` : '');
  const columns: [string, (k: keyof Figures, fmt: (v: number) => string) => string][] = [
    ['node (frozen; the pool included)', (k, fmt) => cell(node[k], fmt)],
    ['driver floor, running', (k, fmt) => cell(floor.running[k], fmt)],
    ['driver floor, frozen', (k, fmt) => cell(floor.frozen[k], fmt)],
  ];
  if (docker) {
    columns.push(
      ['docker + runsc, idle', (k, fmt) => cell(docker.running[k], fmt)],
      ['node ÷ docker', (k) => ratio(node[k], docker.running[k])],
      ['docker + runsc, docker pause', (k, fmt) => cell(docker.paused?.[k], fmt)],
      ['node ÷ docker paused', (k) => ratio(node[k], docker.paused?.[k])],
    );
  }
  say('');
  say(`${IDLE} idle sandboxes / containers side by side (CPU in % of one core over ${WINDOW_MS / 1000} s):`);
  say('');
  say(`| | ${columns.map(([head]) => head).join(' | ')} |`);
  say(`|---|${columns.map(() => '---').join('|')}|`);
  for (const [k, label, fmt] of FIGURE_ROWS)
    say(`| ${label} | ${columns.map(([, get]) => get(k, fmt)).join(' | ')} |`);
}
const cell = (v: number | undefined, fmt: (v: number) => string) => (v === undefined ? '' : fmt(v));

// ------------------------------------------------------------------ run

const inspected = await inspectGvisorHost();
if ('problem' in inspected) throw new Error(inspected.problem);
const dockerLab = dockerWanted(values) ? new DockerLab(inspected, DOCKER_DIR, DOCKER_CGROUP) : undefined;

let server: TestServer | undefined;
let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await server?.stop().catch(() => undefined);
  await dockerLab?.stop().catch((e: unknown) => console.error('docker cleanup:', e));
  destroyAllTestNets();
  for (const d of [HOME, RUNTIME, `${RUNTIME}-driver-none`, `${RUNTIME}-driver-spread`]) {
    await rm(d, { recursive: true, force: true });
  }
  const left = leftBehind([`aenv-${TAG}-`, `aenvtest-${process.pid}-`], [HOME, RUNTIME, DOCKER_DIR]);
  if (left.length) console.error(`left behind:\n${left.join('\n')}`);
}
cleanupOnSignals(cleanup);

/** The machine's CPU over one window before the node starts: what the rest of it uses anyway. */
let machineBefore = 0;

async function main(): Promise<void> {
  machineBefore = (await cpuOver(WINDOW_MS, { machine: machineBusySecs })).machine;
  await rm(HOME, { recursive: true, force: true });
  await mkdir(HOME, { recursive: true });
  await borrowBaseRootfs(HOME);
  server = await startServer({
    API_ADDR: `127.0.0.1:${PORT}`,
    AENV_HOME_PATH: HOME,
    AENV_RUNTIME_PATH: RUNTIME,
    AENV_NETWORK_NODE_TAG: TAG,
    AENV_NETWORK_HOST_RANGE: '10.117.0.0/17',
    ...(MERGE ? { AENV_MERGE_PAGES: '1' } : {}),
    // The defaults otherwise: the pool of 2, admission, max_sandboxes.
  });
  useSdkEnv(`http://127.0.0.1:${PORT}`);
  await (await Sandbox.create()).kill();
  console.log(`AgentENV density benchmark (${new Date().toISOString()}), window ${WINDOW_MS / 1000} s\n`);
  const capture = await templateCapture(HOME);
  const floor = await driverLevel(capture);
  const docker =
    dockerLab &&
    (await dockerLevel(dockerLab, capture).catch((e: unknown) => {
      say(`docker + runsc: no figures: ${String(e)}\ndockerd's output:\n${dockerLab.output().slice(-2000)}`);
      return undefined;
    }));
  sideBySide(await nodeLevel(server.child.pid!), floor, docker);
}

await runBench(main, { server: () => server, cleanup });
