/**
 * Pause/resume endurance: one sandbox paused and resumed at once, over and over, a command before
 * and after each resume, through a real aenv-server and the E2B SDK, as an RL harness that parks
 * its environments between steps does. Counts the cycles that failed (and what failed) beside the
 * pause and resume p50/p95; a failed cycle's sandbox is killed and a new one takes over.
 *
 * Its node shares nothing with the tests or other benches: port 18111, home
 * /var/lib/aenv-bench-cycles (the base rootfs layer is borrowed read-only from the test home),
 * network tag `bc` in 10.190.0.0/16, runtime dir /run/aenv-bench-cycles. Everything is removed at
 * the end, also on failure or Ctrl-C.
 *
 * Run as root: npx tsx bench/pause-cycles.ts [--cycles 500]   (~0.6 s a cycle)
 */
import { mkdir, rm } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Sandbox } from 'e2b';
import { startServer, useSdkEnv, type TestServer } from '@agentenv/test-support/server';
import { benchNode, borrowBaseRootfs, runBench, stopBenchServer } from './bench-node.js';
import { cleanupOnSignals, leftBehind } from './leftovers.js';
import { fmt, percentile, timeMs } from './stats.js';

const { values } = parseArgs({ options: { cycles: { type: 'string', default: '500' } } });
const CYCLES = Number(values.cycles);
if (!Number.isInteger(CYCLES) || CYCLES < 1) throw new Error('--cycles takes a positive integer');

const NODE = benchNode({ port: 18111, name: 'cycles', tag: 'bc', hostRange: '10.190.0.0/16' });
const LONG = { timeoutMs: 3_600_000 };
let server: TestServer | undefined;

let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  if (server) await stopBenchServer(server).catch((e: unknown) => console.error('stopping the node:', e));
  for (const d of [NODE.home, NODE.runtime]) await rm(d, { recursive: true, force: true });
  const left = leftBehind([`aenv-${NODE.tag}-`], [NODE.home, NODE.runtime]);
  if (left.length) console.error(`left behind:\n${left.join('\n')}`);
}
cleanupOnSignals(cleanup);

interface Failure {
  cycle: number;
  step: string;
  error: string;
}

async function main(): Promise<void> {
  await rm(NODE.home, { recursive: true, force: true });
  await mkdir(NODE.home, { recursive: true });
  await borrowBaseRootfs(NODE.home);
  server = await startServer(NODE.env);
  useSdkEnv(NODE.url);

  const pause: number[] = [];
  const resume: number[] = [];
  const failures: Failure[] = [];
  let sbx = await Sandbox.create(LONG);
  const started = Date.now();
  for (let cycle = 0; cycle < CYCLES; cycle++) {
    let step = 'command before the pause';
    try {
      await sbx.commands.run(`echo ${cycle} > /tmp/cycle`);
      step = 'pause';
      pause.push(await timeMs(() => sbx.pause()));
      step = 'resume';
      resume.push(await timeMs(() => Sandbox.connect(sbx.sandboxId, LONG)));
      step = 'command after the resume';
      const r = await sbx.commands.run('cat /tmp/cycle');
      if (r.stdout.trim() !== String(cycle)) throw new Error(`read back ${JSON.stringify(r.stdout)}`);
    } catch (err) {
      failures.push({ cycle, step, error: String(err).split('\n')[0]!.slice(0, 200) });
      await sbx.kill().catch(() => undefined);
      sbx = await Sandbox.create(LONG);
    }
    if ((cycle + 1) % 100 === 0) console.error(`${cycle + 1} of ${CYCLES} cycles, ${failures.length} failed`);
  }
  await sbx.kill();

  const secs = ((Date.now() - started) / 1000).toFixed(0);
  console.log(
    `\nAgentENV pause/resume cycles (${new Date().toISOString()}, ${CYCLES} cycles in ${secs} s)\n`,
  );
  console.log(`failed cycles: ${failures.length} of ${CYCLES}`);
  for (const f of failures) console.log(`  cycle ${f.cycle}, ${f.step}: ${f.error}`);
  for (const [name, ms] of [
    ['pause', pause],
    ['resume right after the pause', resume],
  ] as const) {
    console.log(`${name}: p50 ${fmt(percentile(ms, 50))}, p95 ${fmt(percentile(ms, 95))}`);
  }
}

await runBench(main, { server: () => server, cleanup });
