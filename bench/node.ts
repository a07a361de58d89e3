/**
 * Node benchmark: sandbox lifecycle through the E2B SDK against a real aenv-server, next to the
 * same runtime operations done directly with the gVisor driver (runsc restore/checkpoint of the
 * same template capture; bench/runtime.ts puts the driver within a few % of bare runsc), all in
 * one run. Run as root: npx tsx bench/node.ts [--creates 50] [--capacity 120]
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Sandbox } from 'e2b';
import { NetworkManager, GvisorDriver } from '@agentenv/node';
import {
  removeState,
  startServer,
  TEST_HOME,
  useSdkEnv,
  type TestServer,
} from '@agentenv/test-support/server';
import { templateCapture } from './bare-runsc.js';
import { fmt, line, percentile, timeMs } from './stats.js';

const { values } = parseArgs({
  options: { creates: { type: 'string', default: '50' }, capacity: { type: 'string', default: '120' } },
});
const N = Number(values.creates);
const RES = { cpuCount: 2, memoryMB: 1024, diskSizeMB: 2048 };

async function memAvailable(): Promise<number> {
  return Number(/^MemAvailable:\s+(\d+)/m.exec(await readFile('/proc/meminfo', 'utf8'))?.[1] ?? 0) * 1024;
}

async function withServer<T>(env: Record<string, string>, fn: (s: TestServer) => Promise<T>): Promise<T> {
  removeState();
  const s = await startServer(env);
  useSdkEnv();
  try {
    await (await Sandbox.create()).kill(); // template ready
    return await fn(s);
  } finally {
    await s.stop();
    removeState();
  }
}

// Baseline: the raw runtime operations on the same capture, in this process.
const capture = await templateCapture(TEST_HOME);
const driver = new GvisorDriver({ runtimeDir: '/run/aenv-bench-node', cgroupParent: 'aenv-bench' });
const net = await NetworkManager.create({ nodeTag: 'bn', hostRange: '10.205.0.0/16', poolSize: 2 });
const rawRestore: number[] = [];
const rawCheckpoint: number[] = [];
const rawResume: number[] = [];
const kills: number[] = [];
try {
  for (let i = 0; i < 10; i++) {
    const slot = await net.acquire();
    let h = await driver.restore({ capture, resources: RES, net: slot });
    const dir = `/var/tmp/aenv-bench-node-${process.pid}-${i}`;
    rawCheckpoint.push(await timeMs(() => driver.checkpoint(h, { dir, leaveRunning: false })));
    await slot.reset();
    const t = process.hrtime.bigint();
    h = await driver.restore({ capture: dir, resources: RES, net: slot });
    rawResume.push(Number(process.hrtime.bigint() - t) / 1e6);
    await driver.kill(h);
    await net.release(slot);
    const { rm } = await import('node:fs/promises');
    await rm(dir, { recursive: true, force: true });
  }
  for (let i = 0; i < 20; i++) {
    const slot = await net.acquire();
    let h: Awaited<ReturnType<typeof driver.restore>> | undefined;
    rawRestore.push(
      await timeMs(async () => (h = await driver.restore({ capture, resources: RES, net: slot }))),
    );
    await driver.kill(h!);
    await net.release(slot);
  }
} finally {
  // Nothing of the baseline may outlive the benchmark, even when it fails.
  await driver.close();
  await net.shutdown();
}

console.log(`AgentENV node benchmark (${new Date().toISOString()}), ${N} creates per case\n`);
await withServer({ AENV_POOL_SIZE: '0' }, async () => {
  const creates: number[] = [];
  for (let i = 0; i < N; i++) {
    let s: Sandbox | undefined;
    creates.push(await timeMs(async () => (s = await Sandbox.create())));
    const k = await timeMs(() => s!.kill());
    kills.push(k);
  }
  line('create (warm pool off) vs runsc restore', creates, rawRestore);
  line('kill', kills);
  const sbx = await Sandbox.create({ timeoutMs: 600_000 });
  const pauses: number[] = [];
  const resumes: number[] = [];
  for (let i = 0; i < 10; i++) {
    pauses.push(await timeMs(() => sbx.pause()));
    resumes.push(await timeMs(() => Sandbox.connect(sbx.sandboxId)));
  }
  line('pause vs runsc checkpoint (stop)', pauses, rawCheckpoint);
  line('resume (connect) vs runsc restore', resumes, rawResume);
  await sbx.kill();
  const wall = await timeMs(async () => {
    const made = await Promise.all(Array.from({ length: 20 }, () => Sandbox.create()));
    await Promise.all(made.map((m) => m.kill()));
  });
  console.log(`20 concurrent creates + kills (pool off): ${fmt(wall)} wall`);
});

await withServer({ AENV_POOL_SIZE: '4' }, async () => {
  const creates: number[] = [];
  for (let i = 0; i < N; i++) {
    // Give the pool time to refill, as between the steps of a real rollout.
    await new Promise((r) => setTimeout(r, 1500));
    const t = process.hrtime.bigint();
    const s = await Sandbox.create();
    creates.push(Number(process.hrtime.bigint() - t) / 1e6);
    await s.kill();
  }
  line('create (warm pool 4) vs runsc restore', creates, rawRestore);
});

await withServer({ AENV_POOL_SIZE: '0' }, async () => {
  const cap = Number(values.capacity);
  const held: Sandbox[] = [];
  const first: number[] = [];
  const recent: number[] = [];
  let stop = '';
  try {
    while (held.length < cap) {
      if ((await memAvailable()) < 2 * 2 ** 30) {
        stop = 'less than 2 GiB of memory left';
        break;
      }
      let t = 0;
      try {
        t = await timeMs(async () => held.push(await Sandbox.create({ timeoutMs: 3_600_000 })));
      } catch (e) {
        stop = `create failed: ${(e as Error).message}`;
        break;
      }
      // One slow create on a shared machine says little: compare the last five with the first five.
      recent.push(t);
      if (first.length < 5) first.push(t);
      else if (recent.length >= 5 && percentile(recent.slice(-5), 50) > 2 * percentile(first, 50)) {
        stop = `median create of the last five ${fmt(percentile(recent.slice(-5), 50))}, over 2x the first five's ${fmt(percentile(first, 50))}`;
        break;
      }
    }
    const mem = (await readFile('/proc/meminfo', 'utf8')).match(/^MemAvailable:\s+(\d+)/m)?.[1];
    console.log(
      `idle sandboxes held: ${held.length}${stop ? ` (stopped: ${stop})` : ` (cap ${cap} reached)`}; MemAvailable ${(Number(mem) / 2 ** 20).toFixed(1)} GiB`,
    );
  } finally {
    for (let i = 0; i < held.length; i += 10)
      await Promise.all(held.slice(i, i + 10).map((s) => s.kill().catch(() => undefined)));
  }
});
