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
 *    sandboxes with the pool (their cgroups' cpuacct) and the whole machine; PSS per idle
 *    sandbox; then create p50 (5 creates, each killed again) with 0, 50, 100, 200 and 500 idle
 *    sandboxes held, against the empty node's, with MemAvailable used per held sandbox.
 *
 * CPU is in % of one core. Its node: port 19701, home /var/lib/aenv-h7/density, runtime
 * /run/aenv-h7/density, tag h7 in 10.117.0.0/17 (driver-level sandboxes in 10.117.128.0/17).
 *
 * Run as root: npx tsx bench/density.ts [--steps 0,50,100,200,500] [--window 30] [--idle 20]
 */
import { mkdir, readFile, readdir, rm } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Sandbox } from 'e2b';
import { GvisorDriver, type SandboxHandle } from '@agentenv/node';
import { startServer, useSdkEnv, type TestServer } from '@agentenv/test-support/server';
import { createTestNet, destroyAllTestNets } from '@agentenv/test-support/runtime';
import { templateCapture } from './bare-runsc.js';
import { borrowBaseRootfs } from './bench-node.js';
import { cgroupCpuSecs, cpuOver, descendants, machineBusySecs, processCpuSecs } from './host-cpu.js';
import { cleanupOnSignals, leftBehind } from './leftovers.js';
import { percentile, timeMs } from './stats.js';

const { values } = parseArgs({
  options: {
    steps: { type: 'string', default: '0,50,100,200,500' },
    window: { type: 'string', default: '30' },
    idle: { type: 'string', default: '20' },
  },
});
const STEPS = values.steps.split(',').map(Number);
const WINDOW_MS = Number(values.window) * 1000;
const IDLE = Number(values.idle);

const PORT = 19701;
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

async function pss(cgroupParent: string, id: string): Promise<number> {
  const procs = await readFile(`/sys/fs/cgroup/memory/${cgroupParent}/${id}/cgroup.procs`, 'utf8').catch(
    () => '',
  );
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

async function driverLevel(capture: string): Promise<void> {
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
        say(`driver: ${IDLE} frozen sandboxes: ${frozen.toFixed(3)} % of one core`);
        const thaw = await Promise.all(hs.map((h) => timeMs(() => driver.thaw(h))));
        say(`driver: thaw p50 ${percentile(thaw, 50).toFixed(1)} ms`);
      }
    } finally {
      await driver.close();
      destroyAllTestNets();
    }
  }
}

// ------------------------------------------------------------------ 2. through the node

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
async function idleCost(nodePid: number, ids: readonly string[]): Promise<void> {
  const all = await heldAndPooled();
  const n = await allFrozen(NODE_CGROUP, all);
  const helpers = await helpersOf(nodePid);
  const cpu = await cpuOver(WINDOW_MS, {
    node: () => processCpuSecs(nodePid),
    helpers: async () => (await Promise.all(helpers.map(processCpuSecs))).reduce((a, b) => a + b, 0),
    sandboxes: () => cgroupCpuSecs(NODE_CGROUP),
    machine: machineBusySecs,
  });
  const ours = cpu.node + cpu.helpers + cpu.sandboxes;
  say(
    `node: ${ids.length} idle sandboxes + ${all.length - ids.length} in the pool, ${n} of ${all.length} frozen, over ${WINDOW_MS / 1000} s (% of one core):`,
  );
  say(
    `  node process ${pct(cpu.node)}, its helpers ${pct(cpu.helpers)}, sandboxes + pool ${pct(cpu.sandboxes)}`,
  );
  say(`  all of it ${pct(ours)}; whole machine ${pct(cpu.machine)} (anything else running here included)`);
}
const pct = (v: number) => `${v.toFixed(2)} %`;
const heldAndPooled = async () => (await children(NODE_CGROUP)).filter((id) => id.startsWith('aenv-'));

async function nodeLevel(nodePid: number): Promise<void> {
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
    const perSandbox = n ? mib((emptyNode - (await memAvailable())) / n) : '–';
    const creates: number[] = [];
    for (let i = 0; i < 5; i++) {
      let s: Sandbox | undefined;
      creates.push(await timeMs(async () => (s = await Sandbox.create())));
      await s!.kill();
    }
    const p50 = percentile(creates, 50);
    firstP50 ??= p50;
    return `| ${held.length} | ${p50.toFixed(0)} ms | ${percentile(creates, 95).toFixed(0)} ms | ${(p50 / firstP50).toFixed(2)}× | ${perSandbox} | ${gib(await memAvailable())} |`;
  };
  try {
    // Steps below IDLE are taken before the idle sandboxes exist, so a 0 step means an empty node.
    const rows: string[] = [];
    for (const n of STEPS.filter((n) => n < IDLE)) rows.push(await step(n));
    await hold(IDLE);
    await idleCost(
      nodePid,
      held.map((s) => s.sandboxId),
    );
    const sizes = await Promise.all((await heldAndPooled()).map((id) => pss(NODE_CGROUP, id)));
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
  } finally {
    for (let i = 0; i < held.length; i += 20) {
      await Promise.all(held.slice(i, i + 20).map((s) => s.kill().catch(() => undefined)));
    }
  }
}

// ------------------------------------------------------------------ run

let server: TestServer | undefined;
let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await server?.stop().catch(() => undefined);
  destroyAllTestNets();
  for (const d of [HOME, RUNTIME, `${RUNTIME}-driver-none`, `${RUNTIME}-driver-spread`]) {
    await rm(d, { recursive: true, force: true });
  }
  const left = leftBehind([`aenv-${TAG}-`, `aenvtest-${process.pid}-`], [HOME, RUNTIME]);
  if (left.length) console.error(`left behind:\n${left.join('\n')}`);
}
cleanupOnSignals(cleanup);

try {
  await rm(HOME, { recursive: true, force: true });
  await mkdir(HOME, { recursive: true });
  await borrowBaseRootfs(HOME);
  server = await startServer({
    API_ADDR: `127.0.0.1:${PORT}`,
    AENV_HOME_PATH: HOME,
    AENV_RUNTIME_PATH: RUNTIME,
    AENV_NETWORK_NODE_TAG: TAG,
    AENV_NETWORK_HOST_RANGE: '10.117.0.0/17',
    // The defaults otherwise: the pool of 2, admission, max_sandboxes.
  });
  useSdkEnv(`http://127.0.0.1:${PORT}`);
  await (await Sandbox.create()).kill();
  console.log(`AgentENV density benchmark (${new Date().toISOString()}), window ${WINDOW_MS / 1000} s\n`);
  await driverLevel(await templateCapture(HOME));
  await nodeLevel(server.child.pid!);
} catch (e) {
  console.error(e);
  if (server) console.error(`node output:\n${server.output().slice(-4000)}`);
  process.exitCode = 1;
} finally {
  await cleanup();
}
