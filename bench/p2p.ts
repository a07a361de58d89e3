/**
 * Time to the first create on node B from a snapshot of about 200 MiB that node A holds, with
 * B's chunks coming from A over P2P vs from the S3 repository (s3rver on 127.0.0.1), in one run.
 *
 *   npx tsx bench/p2p.ts [--iter 3] [--blob-mb 175]
 *
 * Two nodes of its own (ports 18109/18110, homes /var/lib/aenv-bench-p2p-{a,b}, network tags
 * bpa/bpb in 10.171.0.0/16 and 10.181.0.0/16, A's endpoint on 127.0.0.1:18119), removed
 * afterwards. Every sample starts B with an empty runtime cache; P2P and S3 samples alternate.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Sandbox } from 'e2b';
import { IrohEndpoint } from '@agentenv/p2p';
import { api, startServer, useSdkEnv, type TestServer } from '@agentenv/test-support/server';
import { metric, nodeConfig, writeP2pKey } from '../packages/node/test/p2p/helpers.js';
import { startS3, type S3Server } from '@agentenv/test-support/snapshot';
import { benchNode, borrowBaseRootfs, stopBenchServer, type BenchNode } from './bench-node.js';
import { cleanupOnSignals, leftBehind } from './leftovers.js';
import { fmt, percentile, timeMs } from './stats.js';

const { values } = parseArgs({
  options: { iter: { type: 'string', default: '3' }, 'blob-mb': { type: 'string', default: '175' } },
});
const ITER = Number(values.iter);
const BLOB_MB = Number(values['blob-mb']);

const a = benchNode({ port: 18109, name: 'p2p-a', tag: 'bpa', hostRange: '10.171.0.0/16' });
const b = benchNode({ port: 18110, name: 'p2p-b', tag: 'bpb', hostRange: '10.181.0.0/16' });
const A_P2P = '127.0.0.1:18119';
const PREFIX = 'bench-p2p';
const aKey = IrohEndpoint.newSecretKey();

let s3: S3Server | undefined;
let nodeA: TestServer | undefined;
let nodeB: TestServer | undefined;

async function stop(node: TestServer | undefined, url: string): Promise<void> {
  if (!node) return;
  useSdkEnv(url);
  await stopBenchServer(node);
}

let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await stop(nodeB, b.url).catch((e: unknown) => console.error('stopping B:', e));
  await stop(nodeA, a.url).catch((e: unknown) => console.error('stopping A:', e));
  await s3?.close();
  for (const n of [a, b]) for (const d of [n.home, n.runtime]) await rm(d, { recursive: true, force: true });
  const left = leftBehind(['aenv-bpa-', 'aenv-bpb-'], [a.home, b.home, a.runtime, b.runtime]);
  if (left.length) console.error(`left behind:\n${left.join('\n')}`);
}
cleanupOnSignals(cleanup);

async function startNode(n: BenchNode, config: string): Promise<TestServer> {
  return startServer({ ...n.env, AENV_CONFIG_PATH: config });
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

try {
  s3 = await startS3();
  for (const n of [a, b]) {
    await rm(n.home, { recursive: true, force: true });
    await borrowBaseRootfs(n.home);
  }
  writeP2pKey(a.home, aKey);
  nodeA = await startNode(a, nodeConfig(a.home, 'a.toml', s3, PREFIX, { bindAddrs: [A_P2P, '[::1]:0'] }));
  useSdkEnv(a.url);
  const sbx = await Sandbox.create({ timeoutMs: 600_000 });
  await sbx.commands.run(`head -c ${BLOB_MB}M /dev/urandom > /home/user/blob`, { timeoutMs: 300_000 });
  const sum = (await sbx.commands.run('sha256sum /home/user/blob')).stdout;
  // Node B starts from it: the answer waits until the shared repository holds it.
  const taken = await api('POST', `/sandboxes/${sbx.sandboxId}/snapshots?wait=stored`, {});
  if (taken.status !== 201)
    throw new Error(`snapshot on A failed: ${taken.status} ${JSON.stringify(taken.json)}`);
  const snap = { snapshotId: String(taken.json.snapshotID) };
  await sbx.kill();
  console.log(`snapshot ${snap.snapshotId} taken on A (a ${BLOB_MB} MiB random file in the sandbox)`);

  const configs = {
    s3: nodeConfig(b.home, 'b-s3.toml', s3, PREFIX),
    peers: nodeConfig(b.home, 'b-peers.toml', s3, PREFIX, {
      peers: [`${IrohEndpoint.idOf(aKey)}@${A_P2P}`],
    }),
  };
  const samples = { s3: [] as number[], peers: [] as number[] };
  const gets = { s3: [] as number[], peers: [] as number[] };
  let capture = 0;
  for (let i = 0; i < ITER; i++) {
    for (const mode of i % 2 ? (['peers', 's3'] as const) : (['s3', 'peers'] as const)) {
      await rm(join(b.home, 'snapshot-cache'), { recursive: true, force: true });
      await rm(join(b.home, 'state'), { recursive: true, force: true });
      nodeB = await startNode(b, configs[mode]);
      useSdkEnv(b.url);
      const before = (await s3.requests())['GET blob'] ?? 0;
      let id = '';
      const ms = await timeMs(async () => {
        const r = await api('POST', '/sandboxes', { templateID: snap.snapshotId });
        if (r.status !== 201) throw new Error(`create on B failed: ${r.status} ${JSON.stringify(r.json)}`);
        id = (r.json as unknown as { sandboxID: string }).sandboxID;
      });
      gets[mode].push(((await s3.requests())['GET blob'] ?? 0) - before);
      capture = (await metric(b.url, 'aenv_chunk_fetch_bytes_total')) || capture;
      const child = await Sandbox.connect(id);
      const got = (await child.commands.run('sha256sum /home/user/blob')).stdout;
      if (got !== sum) throw new Error(`B's sandbox has a different file: ${got} vs ${sum}`);
      await child.kill();
      samples[mode].push(ms);
      console.log(`  ${mode.padEnd(5)} ${fmt(ms)}  (${gets[mode].at(-1)} blob GETs at S3)`);
      await stop(nodeB, b.url);
      nodeB = undefined;
    }
  }
  const p50 = { s3: percentile(samples.s3, 50), peers: percentile(samples.peers, 50) };
  console.log(`\ncapture materialised on B: ${mib(capture)} in chunks; ${ITER} samples each`);
  console.log(
    `first create on B, chunks from S3:    p50 ${fmt(p50.s3)}  (blob GETs p50 ${percentile(gets.s3, 50)})`,
  );
  console.log(
    `first create on B, chunks from A:     p50 ${fmt(p50.peers)}  (blob GETs p50 ${percentile(gets.peers, 50)})`,
  );
  console.log(`ratio peers / S3: ${(p50.peers / p50.s3).toFixed(2)}x`);
} finally {
  await cleanup();
}
