import { pidAlive } from '@agentenv/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_CLUSTER_KEY as API_KEY, TestCluster, type Proc } from '@agentenv/test-support/cluster';
import { fuzz, summary, type FuzzTarget, type Tally } from './fuzz-requests.js';

/**
 * Random malformed and adversarial requests to each process a client can reach (a node, the
 * gateway, the scheduler, and envd through the node's proxy), from a seeded PRNG (AENV_FUZZ_SEED
 * replays a run): none may answer a 5xx that is not a designed answer, and every process must be
 * the same one, still answering, afterwards. 2,500 to each in the suite; AENV_FUZZ_COUNT=10000
 * (or more) for a long run.
 */
const SEED = Number(process.env.AENV_FUZZ_SEED ?? 0x5eed);
const COUNT = Number(process.env.AENV_FUZZ_COUNT ?? 2_500);

const CONTROL_PATHS = [
  '/health',
  '/metrics',
  '/openapi.json',
  '/nodes',
  '/nodes/{id}',
  '/events',
  '/sandboxes',
  '/v2/sandboxes',
  '/sandboxes-cold',
  '/sandboxes/{id}',
  '/sandboxes/{id}/pause',
  '/sandboxes/{id}/resume',
  '/sandboxes/{id}/connect',
  '/sandboxes/{id}/fork',
  '/sandboxes/{id}/timeout',
  '/sandboxes/{id}/refreshes',
  '/sandboxes/{id}/logs',
  '/sandboxes/{id}/metrics',
  '/sandboxes/{id}/events',
  '/sandboxes/{id}/snapshots',
  '/sandboxes/{id}/network',
  '/v2/sandboxes/{id}/logs',
  '/snapshots',
  '/snapshots/{id}',
  '/templates',
  '/v3/templates',
  '/templates/{id}',
  '/templates/{id}/files/{id}',
  '/v2/templates/{id}/builds/{id}',
  '/templates/{id}/builds/{id}/status',
  '/volumes',
  '/volumes/{id}',
  '/volumecontent/{id}/path?path=/x',
  '/volumecontent/{id}/dir?path=/',
  '/volumecontent/{id}/file?path=/x',
  '/dashboard',
  '/dashboard/',
  '/dashboard/index.html',
  '/dashboard/api/summary',
  '/dashboard/api/sandboxes',
  '/dashboard/api/catalog',
  '/dashboard/api/stream',
  '/proxy/{id}/3000/',
  '/files?signature=v1_x&path=/etc/passwd',
];
const SCHEDULER_PATHS = [
  '/health',
  '/metrics',
  ...[
    'Schedule',
    'LookupNode',
    'RecordAssignment',
    'ReleaseReservation',
    'Heartbeat',
    'ListNodes',
    'GetNode',
    'WatchEvents',
    'FindChunkPeers',
  ].map((m) => `/scheduler.v1.SchedulerService/${m}`),
];
const ENVD_PATHS = [
  '/health',
  '/envs',
  '/metrics',
  '/files?path=/etc/hostname',
  '/files?path=/tmp/x&username=root',
  '/filesystem.Filesystem/Stat',
  '/filesystem.Filesystem/ListDir',
  '/process.Process/List',
  '/process.Process/Start',
  '/process.Process/Connect',
];

/**
 * The 5xx answers that are not a failure of the process that gave them: E2B's answer for a
 * sandbox that is not there, or not reachable on that port (502, with the sandbox's id on a node,
 * "sandbox … was not found" on the gateway; a HEAD has no body to tell it by): what a client of a
 * missing sandbox is meant to get. Any other 5xx fails the run.
 */
function designed(status: number, body: string, method: string): string | undefined {
  if (status !== 502) return undefined;
  if (method === 'HEAD' || body.includes('"sandboxId"') || /sandbox .* was not found/.test(body))
    return 'sandbox-not-found 502';
  return undefined;
}

describe('fuzzing every process a client reaches', () => {
  let c: TestCluster;
  let sandboxId: string;
  const pids: Record<string, number> = {};

  beforeAll(async () => {
    c = await TestCluster.start({ nodes: 1, store: 'memory' });
    const made = await c.api('POST', '/sandboxes', { templateID: 'base', timeout: 900, secure: true });
    expect(made.status, JSON.stringify(made.json)).toBe(201);
    sandboxId = made.json.sandboxID as string;
    for (const [name, p] of Object.entries({ node: c.nodes[0], gateway: c.gateway, scheduler: c.scheduler }))
      pids[name] = (p as Proc).child.pid!;
  });

  afterAll(async () => {
    if (sandboxId) await c?.api('DELETE', `/sandboxes/${sandboxId}`).catch(() => undefined);
    await c?.stop();
  });

  /** 1 when `proc` is no longer the process it was before the run (it died or was replaced). */
  const restarts = (name: string, proc: Proc | undefined) =>
    proc?.child.pid === pids[name] && proc?.child.exitCode === null && pidAlive(pids[name]!) ? 0 : 1;

  /** Prints the target's line, then holds it to no unexpected 5xx, no restart, still answering. */
  async function judge(name: string, tally: Tally, restarted: number, health: string) {
    console.log(summary(name, tally, restarted));
    if (tally.serverErrors.size) console.log([...tally.serverErrors].slice(0, 20));
    expect(tally.requests).toBe(COUNT);
    expect([...tally.serverErrors]).toEqual([]);
    expect(restarted).toBe(0);
    expect((await fetch(health)).status, `${health} after the run`).toBe(204);
  }

  const control = (name: string, port: number, paths: readonly string[]): FuzzTarget => ({
    name,
    port,
    paths,
    apiKey: API_KEY,
  });

  it('a node', async () => {
    const tally = await fuzz(control('node', 19910, CONTROL_PATHS), SEED, COUNT, designed);
    await judge('node', tally, restarts('node', c.nodes[0]), `${c.nodeUrl(0)}/health`);
  });

  it('the gateway', async () => {
    const tally = await fuzz(control('gateway', 19900, CONTROL_PATHS), SEED + 1, COUNT, designed);
    await judge('gateway', tally, restarts('gateway', c.gateway), `${c.gatewayUrl}/health`);
  });

  it('the scheduler', async () => {
    // Only the cluster's own processes hold its key, and a random body could be a real heartbeat
    // or placement: the key goes only with calls that change nothing.
    const target = { ...control('scheduler', 19901, SCHEDULER_PATHS), keyOnSafeOnly: true };
    const tally = await fuzz(target, SEED + 2, COUNT, designed);
    await judge('scheduler', tally, restarts('scheduler', c.scheduler), 'http://127.0.0.1:19901/health');
  });

  it("envd, through the node's proxy", async () => {
    const target: FuzzTarget = {
      name: 'envd',
      port: 19910,
      paths: ENVD_PATHS,
      prefix: `/proxy/${sandboxId}/49983`,
      apiKey: API_KEY,
    };
    const tally = await fuzz(target, SEED + 3, COUNT, designed);
    // envd's process is inside the sandbox: the sandbox still running and envd answering is its proof.
    const sb = await c.api('GET', `/sandboxes/${sandboxId}`);
    expect(sb.json).toMatchObject({ state: 'running' });
    await judge(
      'envd',
      tally,
      restarts('node', c.nodes[0]),
      `${c.nodeUrl(0)}/proxy/${sandboxId}/49983/health`,
    );
  });
});
