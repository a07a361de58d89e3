/**
 * Runtime benchmark: driver operations against the bare runsc commands doing the same work (the
 * floor), measured in the same run; parallel restores; idle memory; template build time.
 * Run as root: `npx tsx bench/runtime.ts` (ITER=5 by default; BENCH_FULL=1 also rebuilds the rootfs).
 */
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  GvisorDriver,
  inspectGvisorHost,
  ensureTemplate,
  type Resources,
  type SandboxHandle,
} from '@agentenv/node';
import { ENVD_PORT } from '@agentenv/protocol';
import {
  baseTemplate,
  TEST_HOME,
  TOOLS_DIR,
  createTestNet,
  destroyAllTestNets,
  type TestNet,
} from '@agentenv/test-support/runtime';
import { bareRunsc } from './bare-runsc.js';
import { borrowBaseRootfs } from './bench-node.js';

const ITER = Number(process.env.ITER ?? 5);
const RES: Resources = { cpuCount: 1, memoryMB: 512, diskSizeMB: 512 };
const RUNTIME_DIR = `/run/aenv-bench/${process.pid}`;
const SCRATCH = join(TEST_HOME, 'bench', String(process.pid));

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? NaN;
const now = () => performance.now();
const rows: { op: string; driver: number; floor: number | null }[] = [];

async function main() {
  const host = await inspectGvisorHost();
  if ('problem' in host) throw new Error(host.problem);
  const driver = new GvisorDriver({ runtimeDir: RUNTIME_DIR });
  const template = await baseTemplate(driver);
  await mkdir(SCRATCH, { recursive: true });
  const nets: TestNet[] = [];
  const net = () => {
    const n = createTestNet();
    nets.push(n);
    return n;
  };

  // ---- bare runsc, with the same flags, bundle and readiness check as the driver
  const bare = bareRunsc(host, { dir: RUNTIME_DIR, cgroupParent: 'aenv-bench' });
  const source = { rootfs: template.layers[0]!, init: template.init, mounts: template.mounts };

  // start: fresh boot until envd answers
  const dStart: number[] = [];
  const bStart: number[] = [];
  const dCkpt: number[] = [];
  const bCkpt: number[] = [];
  const dRestore: number[] = [];
  const bRestore: number[] = [];
  const dPause: number[] = [];
  const bPause: number[] = [];
  const dResume: number[] = [];
  const bResume: number[] = [];
  for (let i = 0; i < ITER; i++) {
    let t = now();
    const n1 = net();
    const h = await driver.start({
      layers: template.layers,
      mounts: template.mounts,
      init: template.init,
      resources: RES,
      net: n1,
      envdPort: ENVD_PORT,
    });
    dStart.push(now() - t);
    const n2 = net();
    const b = await bare.bundle(n2, source, RES);
    t = now();
    await bare.launch(['run', '--bundle', b.dir, '--detach', b.id]);
    await bare.healthy(n2);
    bStart.push(now() - t);

    t = now();
    const cap = await driver.checkpoint(h, { dir: join(SCRATCH, `d${i}`), leaveRunning: true });
    dCkpt.push(now() - t);
    t = now();
    await bare.run([
      'checkpoint',
      '--image-path',
      join(SCRATCH, `b${i}`),
      '--compression=none',
      '--leave-running',
      b.id,
    ]);
    bCkpt.push(now() - t);

    t = now();
    await driver.pause(h);
    dPause.push(now() - t);
    t = now();
    await driver.resume(h);
    dResume.push(now() - t);
    t = now();
    await bare.run(['pause', b.id]);
    bPause.push(now() - t);
    t = now();
    await bare.run(['resume', b.id]);
    bResume.push(now() - t);

    const n3 = net();
    t = now();
    const r = await driver.restore({ capture: cap, resources: RES, net: n3 });
    dRestore.push(now() - t);
    const n4 = net();
    const rb = await bare.bundle(n4, source, RES);
    t = now();
    await bare.launch([
      'restore',
      '--image-path',
      join(SCRATCH, `b${i}`),
      '--bundle',
      rb.dir,
      '--detach',
      rb.id,
    ]);
    await bare.healthy(n4);
    bRestore.push(now() - t);

    await driver.kill(h);
    await driver.kill(r);
    await bare.kill(b.id);
    await bare.kill(rb.id);
  }
  rows.push({ op: 'start (fresh boot → envd /health)', driver: p50(dStart), floor: p50(bStart) });
  rows.push({ op: 'checkpoint --leave-running', driver: p50(dCkpt), floor: p50(bCkpt) });
  rows.push({ op: 'restore (→ envd /health)', driver: p50(dRestore), floor: p50(bRestore) });
  rows.push({ op: 'pause', driver: p50(dPause), floor: p50(bPause) });
  rows.push({ op: 'resume', driver: p50(dResume), floor: p50(bResume) });

  // parallel restores of the template's ready state
  for (const k of [1, 4, 16]) {
    const t = now();
    const hs = await Promise.all(
      Array.from({ length: k }, () =>
        driver.restore({ capture: template.capture, resources: RES, net: net() }),
      ),
    );
    rows.push({ op: `restore ×${k} in parallel (all healthy)`, driver: now() - t, floor: null });
    await Promise.all(hs.map((h) => driver.kill(h)));
  }

  // idle PSS: a fresh boot and a restored copy, after settling
  const pss = async (h: SandboxHandle) => {
    let kb = 0;
    for (const pid of await driver.processIds(h)) {
      const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
      kb += Number(/^Pss:\s+(\d+)/m.exec(text)?.[1] ?? 0);
    }
    return kb / 1024;
  };
  const fresh = await driver.start({
    layers: template.layers,
    mounts: template.mounts,
    init: template.init,
    resources: RES,
    net: net(),
    envdPort: ENVD_PORT,
  });
  const restored = await driver.restore({ capture: template.capture, resources: RES, net: net() });
  await new Promise((r) => setTimeout(r, 3000));
  const pssFresh = await pss(fresh);
  const pssRestored = await pss(restored);
  await driver.kill(fresh);
  await driver.kill(restored);

  // template ready-state build (rootfs reused unless BENCH_FULL=1)
  const home = join(SCRATCH, 'home');
  if (process.env.BENCH_FULL) await mkdir(join(home, 'layers'), { recursive: true });
  else await borrowBaseRootfs(home);
  const tb = now();
  const built = await ensureTemplate({ home, driver, toolsDir: TOOLS_DIR, net: net() });
  const buildMs = now() - tb;

  await driver.close();
  destroyAllTestNets();
  await rm(SCRATCH, { recursive: true, force: true });
  await bare.cleanup();
  await rm(RUNTIME_DIR, { recursive: true, force: true });

  console.log(`\nruntime benchmark (gvisor, runsc ${host.runscVersion}, ${ITER} iterations, p50 ms)`);
  console.log('operation'.padEnd(42), 'driver'.padStart(9), 'bare runsc'.padStart(11), 'ratio'.padStart(7));
  for (const r of rows) {
    console.log(
      r.op.padEnd(42),
      r.driver.toFixed(1).padStart(9),
      (r.floor === null ? '-' : r.floor.toFixed(1)).padStart(11),
      (r.floor === null ? '-' : (r.driver / r.floor).toFixed(2)).padStart(7),
    );
  }
  console.log(`idle PSS: fresh boot ${pssFresh.toFixed(1)} MiB, restored ${pssRestored.toFixed(1)} MiB`);
  console.log(
    `template build: ready state ${(built.built?.readyMs ?? buildMs).toFixed(0)} ms` +
      (built.built?.rootfsMs
        ? `, rootfs ${(built.built.rootfsMs / 1000).toFixed(1)} s`
        : ' (rootfs reused)') +
      `, total ${(buildMs / 1000).toFixed(1)} s`,
  );
}

main().catch((e: unknown) => {
  console.error(e);
  destroyAllTestNets();
  process.exit(1);
});
