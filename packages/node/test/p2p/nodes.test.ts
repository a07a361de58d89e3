/**
 * Two real nodes sharing an S3 repository (s3rver, which counts the requests it serves): node A
 * takes a snapshot and starts from it, then node B starts from the same snapshot, with P2P off
 * (every chunk from S3) and on (chunks from A), with a peer that lies about the bytes, and with A
 * killed while B is fetching from it. A is a member of a cluster (a real aenv-scheduler), so B can
 * also find it through the scheduler's chunk index instead of a static peer list.
 */
import { Sandbox } from 'e2b';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSchedulerClient } from '@agentenv/scheduler';
import { IrohEndpoint, PeerClient } from '@agentenv/p2p';
import { createRepository, SnapshotStore } from '@agentenv/snapshot';
import {
  api,
  API_KEY,
  cleanSandboxes,
  homeOf,
  nearInstance,
  startServer,
  urlOf,
  useSdkEnv,
  type TestServer,
} from '@agentenv/test-support/server';
import { startSchedulerProcess, type SchedulerProcess } from '@agentenv/test-support/cluster';
import { startS3, type S3Server } from '@agentenv/test-support/snapshot';
import { until } from '@agentenv/test-support';
import { metric, nodeConfig, resetNode, startEvilPeer, udpSocketsOf, writeP2pKey } from './helpers.js';

const A = nearInstance(1);
const B = nearInstance(2);
const A_P2P = '127.0.0.1:19601';
const PREFIX = 'p2p-test';
const SCHEDULER_PORT = 22100;
const dir = mkdtempSync(path.join(tmpdir(), 'aenv-p2p-'));
const aKey = IrohEndpoint.newSecretKey();
const aPeer = `${IrohEndpoint.idOf(aKey)}@${A_P2P}`;

let s3: S3Server;
let scheduler: SchedulerProcess;
let nodeA: TestServer | undefined;
let nodeB: TestServer | undefined;
let snapshotId = '';
let blobSum = '';

async function startA(): Promise<TestServer> {
  const config = nodeConfig(dir, 'a.toml', s3, PREFIX, { bindAddrs: [A_P2P, '[::1]:0'] });
  return startServer({ AENV_CONFIG_PATH: config, AENV_POOL_SIZE: '0', ...member('p2p-node-a') }, A);
}

/** The environment of a node joining the test's cluster as `nodeId`. */
function member(nodeId: string): Record<string, string> {
  return { AENV_SCHEDULER_URL: scheduler.url, AENV_NODE_ID: nodeId };
}

/** B with an empty runtime cache. */
async function startB(
  name: string,
  p2p?: Parameters<typeof nodeConfig>[4],
  env: Record<string, string> = {},
): Promise<TestServer> {
  await nodeB?.stop();
  resetNode(B);
  const config = nodeConfig(dir, name, s3, PREFIX, p2p);
  nodeB = await startServer({ AENV_CONFIG_PATH: config, AENV_POOL_SIZE: '0', ...env }, B);
  return nodeB;
}

async function blobGets(): Promise<number> {
  return (await s3.requests())['GET blob'] ?? 0;
}

/** The snapshot's chunks ([hash, bytes]) as its manifest in S3 lists them. */
async function snapshotChunks(): Promise<(readonly [string, number])[]> {
  const repository = createRepository(s3.config(PREFIX));
  await repository.open();
  try {
    const store = new SnapshotStore({ repository });
    const manifest = await store.readManifest(await store.getRecord(snapshotId));
    return manifest.files.flatMap((f) => f.chunks);
  } finally {
    await repository.close();
  }
}

/** Creates a sandbox from the snapshot on `instance` and checks its file came through whole. */
async function createAndCheck(instance: number): Promise<void> {
  useSdkEnv(urlOf(instance));
  const r = await api('POST', '/sandboxes', { templateID: snapshotId });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  const sbx = await Sandbox.connect((r.json as unknown as { sandboxID: string }).sandboxID);
  expect((await sbx.commands.run('sha256sum /home/user/blob')).stdout).toBe(blobSum);
  await sbx.kill();
}

describe('P2P chunk exchange between two nodes', () => {
  beforeAll(async () => {
    [s3, scheduler] = await Promise.all([
      startS3(),
      startSchedulerProcess({ port: SCHEDULER_PORT, apiKey: API_KEY, heartbeatIntervalMs: 500 }),
    ]);
    resetNode(A);
    resetNode(B);
    writeP2pKey(homeOf(A), aKey);
    nodeA = await startA();
    useSdkEnv(urlOf(A));
    const sbx = await Sandbox.create();
    // Random bytes, so no chunk of it is shared with anything else.
    await sbx.commands.run('head -c 32M /dev/urandom > /home/user/blob');
    blobSum = (await sbx.commands.run('sha256sum /home/user/blob')).stdout;
    // Node B starts from it: the answer waits until the shared repository holds it.
    const taken = await api('POST', `/sandboxes/${sbx.sandboxId}/snapshots?wait=stored`, {});
    expect(taken.status, JSON.stringify(taken.json)).toBe(201);
    snapshotId = String(taken.json.snapshotID);
    await sbx.kill();
    await createAndCheck(A);
  });

  afterAll(async () => {
    for (const [n, node] of [
      [B, nodeB],
      [A, nodeA],
    ] as const) {
      if (!node) continue;
      useSdkEnv(urlOf(n));
      await cleanSandboxes().catch(() => undefined);
      await node.stop();
    }
    // A was killed by a test: a restart reclaims what it left, then it stops cleanly.
    if (nodeA?.child.signalCode === 'SIGKILL') await (await startA()).stop();
    resetNode(A);
    resetNode(B);
    await scheduler?.stop();
    await s3?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  let offGets = 0;

  it('with p2p off (the default) a node opens no endpoint and reads every chunk from S3', async () => {
    const b = await startB('b-off.toml');
    expect(udpSocketsOf(b.child.pid!)).toEqual([]);
    expect(existsSync(path.join(homeOf(B), 'secrets', 'p2p-key'))).toBe(false);
    expect(udpSocketsOf(nodeA!.child.pid!).length).toBeGreaterThan(0);
    const before = await blobGets();
    await createAndCheck(B);
    offGets = (await blobGets()) - before;
    expect(offGets).toBeGreaterThan(100);
    expect(await metric(urlOf(B), 'aenv_chunk_fetch_chunks_total', { source: 'peers' })).toBe(0);
  });

  it("with p2p on, B takes the chunks from A: B's chunk GETs at S3 drop by at least 90 %", async () => {
    await startB('b-on.toml', { peers: [aPeer] });
    expect(statSync(path.join(homeOf(B), 'secrets', 'p2p-key')).mode & 0o777).toBe(0o600);
    const servedBefore = await metric(urlOf(A), 'aenv_p2p_served_chunks_total');
    const before = await blobGets();
    await createAndCheck(B);
    const onGets = (await blobGets()) - before;
    console.log(`B's blob GETs at S3: ${offGets} with p2p off, ${onGets} with p2p on`);
    expect(onGets).toBeLessThanOrEqual(offGets * 0.1);
    const fromPeers = await metric(urlOf(B), 'aenv_chunk_fetch_chunks_total', { source: 'peers' });
    expect(fromPeers).toBeGreaterThan(100);
    expect((await metric(urlOf(A), 'aenv_p2p_served_chunks_total')) - servedBefore).toBe(fromPeers);
    expect(await metric(urlOf(B), 'aenv_p2p_peer_hit_ratio')).toBeGreaterThanOrEqual(0.9);
  });

  it('a peer without the cluster key gets nothing from A', async () => {
    const [hash, bytes] = (await snapshotChunks())[0]!;
    const endpoint = await IrohEndpoint.bind({
      secretKey: IrohEndpoint.newSecretKey(),
      bindAddrs: ['127.0.0.1:0'],
    });
    const peer = { id: IrohEndpoint.idOf(aKey), addresses: [A_P2P] };
    const as = (apiKey: string) =>
      new PeerClient(peer, { endpoint, apiKey, perPeerLimit: 1, timeoutMs: 5000 });
    try {
      const refusedBefore = await metric(urlOf(A), 'aenv_p2p_refused_requests_total', {
        reason: 'unauthorized',
      });
      const servedBefore = await metric(urlOf(A), 'aenv_p2p_served_chunks_total');
      const intruder = as('e2b_' + '0'.repeat(40));
      // UNAUTHORIZED, or the connection closed before that answer arrived: no bytes either way.
      await expect(intruder.get(hash, bytes)).rejects.toThrow();
      intruder.close();
      const intruder2 = as('not the key at all');
      await expect(intruder2.have([hash])).rejects.toThrow();
      intruder2.close();
      expect(await metric(urlOf(A), 'aenv_p2p_served_chunks_total')).toBe(servedBefore);
      expect(
        await metric(urlOf(A), 'aenv_p2p_refused_requests_total', { reason: 'unauthorized' }),
      ).toBeGreaterThanOrEqual(refusedBefore + 2);
      // The same request with the key gets the chunk: A does hold it.
      const member = as(API_KEY);
      expect((await member.get(hash, bytes))?.length).toBe(bytes);
      member.close();
    } finally {
      await endpoint.close();
    }
  });

  it('a peer serving corrupted bytes is caught by the hash, left out and counted; S3 serves instead', async () => {
    const evilKey = IrohEndpoint.newSecretKey();
    const evilAddr = '127.0.0.1:19602';
    // The peer reads the whole snapshot before it serves: B restarts meanwhile, knowing its id.
    const starting = startEvilPeer({
      repository: s3.config(PREFIX),
      snapshotId,
      apiKey: API_KEY,
      bindAddr: evilAddr,
      secretKey: evilKey,
    });
    try {
      await startB('b-evil.toml', { peers: [`${IrohEndpoint.idOf(evilKey)}@${evilAddr}`] });
      // Its own reads of the snapshot are over once it is ready.
      expect((await starting).peer).toBe(`${IrohEndpoint.idOf(evilKey)}@${evilAddr}`);
      const before = await blobGets();
      await createAndCheck(B);
      expect((await blobGets()) - before).toBeGreaterThanOrEqual(offGets * 0.9);
      expect(
        await metric(urlOf(B), 'aenv_p2p_peer_errors_total', { kind: 'corrupt' }),
      ).toBeGreaterThanOrEqual(1);
      expect(await metric(urlOf(B), 'aenv_chunk_fetch_chunks_total', { source: 'peers' })).toBe(0);
    } finally {
      await (await starting).stop();
    }
  });

  it("in a cluster, B finds A through the scheduler's chunk index (no static peers): S3 GETs drop by at least 90 %", async () => {
    const smallest = [...new Set((await snapshotChunks()).map(([h]) => h))].sort().slice(0, 16);
    const index = createSchedulerClient({ url: scheduler.url, apiKey: API_KEY });
    // A's heartbeat has carried its endpoint and its sample of the snapshot's chunks.
    await until('the scheduler indexing A as a holder of the snapshot', async () => {
      const res = await index
        .findChunkPeers({ keys: smallest, excludeNodeId: 'p2p-node-b', maxPeers: 4 }, { timeoutMs: 5000 })
        .catch(() => null);
      return !!res?.results.some((r) =>
        r.peers.some((p) => p.nodeId === 'p2p-node-a' && p.endpoint?.endpointId),
      );
    });
    await startB('b-index.toml', {}, member('p2p-node-b'));
    const before = await blobGets();
    await createAndCheck(B);
    const indexGets = (await blobGets()) - before;
    console.log(`B's blob GETs at S3: ${offGets} with p2p off, ${indexGets} with peers from the scheduler`);
    expect(indexGets).toBeLessThanOrEqual(offGets * 0.1);
    expect(await metric(urlOf(B), 'aenv_chunk_fetch_chunks_total', { source: 'peers' })).toBeGreaterThan(100);
  });

  it("A's endpoint killed mid-transfer: B completes from S3 and the sandbox starts", async () => {
    await startB('b-kill.toml', { peers: [aPeer], requestTimeoutMs: 3000 });
    useSdkEnv(urlOf(B));
    const created = api('POST', '/sandboxes', { templateID: snapshotId });
    // Watched closely: A must go while the transfer runs, not after it.
    await until(
      'B fetching chunks from A',
      async () => (await metric(urlOf(B), 'aenv_chunk_fetch_chunks_total', { source: 'peers' })) > 0,
      { intervalMs: 50 },
    );
    await nodeA!.stop('SIGKILL');
    const r = await created;
    expect(r.status, JSON.stringify(r.json)).toBe(201);
    const sbx = await Sandbox.connect((r.json as unknown as { sandboxID: string }).sandboxID);
    expect((await sbx.commands.run('sha256sum /home/user/blob')).stdout).toBe(blobSum);
    await sbx.kill();
    expect(await metric(urlOf(B), 'aenv_chunk_fetch_chunks_total', { source: 'repository' })).toBeGreaterThan(
      0,
    );
    expect(await metric(urlOf(B), 'aenv_p2p_peer_errors_total')).toBeGreaterThanOrEqual(1);
  });
});
