/**
 * envd benchmark: the E2B SDK against a local envd (debug mode) versus doing the same thing
 * directly on the host, measured in one run so the ratio is meaningful on a noisy machine.
 * Run as root: npx tsx bench/envd.ts [--runs 200]
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, readFile, rm, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Sandbox } from 'e2b';
import { startEnvdProcess } from '@agentenv/test-support/envd';
import { fmt, percentile, row, sample, timeMs } from './stats.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '200' } } });
const runs = Number(values.runs);

const spawnWait = (cmd: string, args: string[]) =>
  new Promise<void>((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: 'ignore' });
    c.once('error', reject).once('exit', () => resolve());
  });

function rssKiB(pid: number): Promise<number> {
  return readFile(`/proc/${pid}/status`, 'utf8').then((s) => Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0));
}

const envd = await startEnvdProcess();
try {
  await new Promise((r) => setTimeout(r, 1000));
  const idleRss = await rssKiB(envd.child.pid!);
  const sbx = await Sandbox.create();
  const rows = [];

  for (let i = 0; i < 10; i++) await sbx.commands.run('true');
  rows.push(
    row(
      `commands.run('true') x${runs} vs spawn('true')`,
      await sample(runs, () => sbx.commands.run('true')),
      await sample(runs, () => spawnWait('true', [])),
    ),
  );
  rows.push(
    row(
      `… vs spawn('bash -l -c true') (what run() executes)`,
      await sample(Math.min(runs, 100), () => sbx.commands.run('true')),
      await sample(Math.min(runs, 100), () => spawnWait('/bin/bash', ['-l', '-c', 'true'])),
    ),
  );

  const concurrent = await timeMs(() =>
    Promise.all(Array.from({ length: 50 }, () => sbx.commands.run('true'))),
  );
  const concurrentBase = await timeMs(() =>
    Promise.all(Array.from({ length: 50 }, () => spawnWait('/bin/bash', ['-l', '-c', 'true']))),
  );

  const data = randomBytes(64 << 20);
  const src = '/tmp/aenv-bench-src';
  await writeFile(src, data);
  const up = await sample(5, () => sbx.files.write('/tmp/aenv-bench-up', new Blob([data])));
  const down = await sample(5, () => sbx.files.read('/tmp/aenv-bench-up', { format: 'bytes' }));
  const copy = await sample(5, () => copyFile(src, '/tmp/aenv-bench-copy'));
  rows.push(row('64 MiB files.write vs copyFile', up, copy));
  rows.push(row('64 MiB files.read vs copyFile', down, copy));
  await Promise.all(
    ['/tmp/aenv-bench-src', '/tmp/aenv-bench-up', '/tmp/aenv-bench-copy'].map((f) => rm(f, { force: true })),
  );

  console.table(rows);
  console.log(
    `50 concurrent commands.run('true'): ${fmt(concurrent)} (50 concurrent bash -l -c true: ${fmt(concurrentBase)}, ratio ${(concurrent / concurrentBase).toFixed(2)}x)`,
  );
  console.log(
    `64 MiB throughput: upload ${((64 / percentile(up, 50)) * 1000).toFixed(0)} MiB/s, download ${((64 / percentile(down, 50)) * 1000).toFixed(0)} MiB/s`,
  );
  console.log(
    `envd idle RSS: ${(idleRss / 1024).toFixed(1)} MiB; after the benchmark: ${((await rssKiB(envd.child.pid!)) / 1024).toFixed(1)} MiB`,
  );
} finally {
  await envd.stop();
}
