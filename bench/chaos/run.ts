/**
 * A chaos run: a replicated cluster on this machine (Redis with its append-only file, 2
 * schedulers, 2 gateways, N nodes), clients running rollouts through the official SDK while the
 * injector kills and stops its parts, then every fault healed and the books checked.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { Sandbox } from 'e2b';
import { TEST_CLUSTER_HOME, TEST_CLUSTER_KEY as API_KEY, TestCluster } from '@agentenv/test-support/cluster';
import { eventually } from '@agentenv/test-support';
import { leftBehind } from '../leftovers.js';
import { FaultInjector, type FaultLog } from './faults.js';
import { judge, type Observation, type Seen, type Verdict } from './invariants.js';
import { ChaosClient, newBooks, type Books } from './workload.js';

export interface ChaosOptions {
  /** How long clients run rollouts, at least. */
  durationMs: number;
  /**
   * Rollouts go on past durationMs until this many faults have struck and healed, for at most
   * LATE_FAULTS_MS more. Default 0.
   */
  minFaults?: number;
  clients: number;
  nodes: number;
  seed: number;
  faultEveryMs: number;
  maxDownMs: number;
  log?: (line: string) => void;
}

/** How long past durationMs rollouts wait for minFaults (a failed fault ends them at once). */
const LATE_FAULTS_MS = 120_000;

export interface ChaosResult {
  books: Books;
  faults: FaultLog[];
  verdict: Verdict;
  /** Sandboxes the nodes hold that no client was told of (a create whose answer was lost). */
  untracked: number;
  leftovers: string[];
  rollouts: number;
}

/** A small seeded generator (mulberry32), so a run's choices can be replayed. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export async function runChaos(o: ChaosOptions): Promise<ChaosResult> {
  const log = o.log ?? (() => undefined);
  const random = seeded(o.seed);
  const c = await TestCluster.start({ nodes: o.nodes, store: 'redis', replicas: 2 });
  const books = newBooks();
  let rollouts = 0;
  try {
    const fate = (id: string) => stateOf(c, id);
    const injector = new FaultInjector({
      cluster: c,
      nodes: o.nodes,
      random,
      everyMs: o.faultEveryMs,
      maxDownMs: o.maxDownMs,
    });
    const until = Date.now() + o.durationMs;
    const more = () =>
      injector.active && injector.healed < (o.minFaults ?? 0) && Date.now() < until + LATE_FAULTS_MS;
    injector.start();
    await Promise.all(
      Array.from({ length: o.clients }, async () => {
        const client = new ChaosClient({ gateways: c.gatewayUrls, apiKey: API_KEY, random, books, fate });
        while (Date.now() < until || more()) {
          await client.rollout();
          rollouts++;
          if (rollouts % 10 === 0) log(`${rollouts} rollouts, ${injector.log.length} faults`);
        }
      }),
    );
    await injector.stop();
    log(`healed after ${injector.log.length} faults; checking`);
    await c.waitReady(o.nodes, 120_000);
    const observation = await settle(c, books);
    const untracked = [...observation.nodes.values()]
      .flatMap((l) => [...l.keys()])
      .filter((id) => !books.told.has(id)).length;
    const verdict = judge(observation);
    await c.stop();
    return { books, faults: injector.log, verdict, untracked, leftovers: leftovers(), rollouts };
  } catch (err) {
    await c.stop();
    throw err;
  }
}

async function stateOf(c: TestCluster, id: string): Promise<{ state: string; reason?: string }> {
  // Just after a fault healed, every gateway may answer a retryable 5xx (a scheduler whose Redis
  // came back reads the nodes' rosters first): asked again, as a client would.
  return eventually(
    async () => {
      for (const url of c.gatewayUrls) {
        const r = await c.apiAt(url, 'GET', `/sandboxes/${id}`).catch(() => undefined);
        if (!r || r.status >= 500) continue;
        if (r.status === 404) return { state: 'absent' };
        return { state: String(r.json.state), reason: r.json.reason as string | undefined };
      }
      throw new Error(`no gateway answered for ${id}`);
    },
    { timeoutMs: 30_000, intervalMs: 500 },
  ).catch(() => ({ state: 'unknown' }));
}

/**
 * The cluster's view once its parts agree: node listings and the store's bindings are read again
 * until every sandbox on a node is bound in the store (heartbeats converge within seconds), then
 * each sandbox a client knows is used once more.
 */
async function settle(c: TestCluster, books: Books): Promise<Observation> {
  const passive = async () => {
    const nodes = new Map<string, Map<string, string>>();
    for (let i = 0; i < c.nodes.length; i++) {
      const r = await c.apiAt(c.nodeUrl(i), 'GET', '/v2/sandboxes?limit=100');
      if (r.status !== 200) throw new Error(`node ${i} lists: ${r.status} ${JSON.stringify(r.json)}`);
      const list = r.json as unknown as { sandboxID: string; state: string }[];
      nodes.set(TestCluster.nodeId(i), new Map(list.map((s) => [s.sandboxID, s.state])));
    }
    return { nodes, bindings: bindings() };
  };
  const empty = { told: new Map(), seen: new Map(), snapshots: new Map() };
  const { nodes, bindings: bound } = await eventually(
    async () => {
      const p = await passive();
      const v = judge({ ...empty, ...p }).violations;
      if (v.length) throw new Error(v.map((x) => `${x.rule} ${x.id}: ${x.detail}`).join('\n'));
      return p;
    },
    { timeoutMs: 60_000, intervalMs: 1_000 },
  ).catch(passive);

  const seen = new Map<string, Seen>();
  for (const [id, told] of books.told) {
    const f = await stateOf(c, id);
    const state = (
      ['running', 'paused', 'lost', 'absent'].includes(f.state) ? f.state : 'other'
    ) as Seen['state'];
    const entry: Seen = { state, ...(f.reason ? { reason: f.reason } : {}) };
    if (told !== 'killed' && (state === 'running' || state === 'paused')) entry.usable = await usable(c, id);
    seen.set(id, entry);
  }
  const snapshots = new Map<string, boolean>();
  for (const id of books.snapshots) snapshots.set(id, await startsFrom(c, id));
  return { told: books.told, seen, nodes, bindings: bound, snapshots };
}

const opts = (c: TestCluster) => ({ apiUrl: c.gatewayUrl, sandboxUrl: c.gatewayUrl, apiKey: API_KEY });

async function usable(c: TestCluster, id: string): Promise<boolean> {
  try {
    const s = await Sandbox.connect(id, { ...opts(c), timeoutMs: 600_000 });
    return (await s.commands.run('echo ok', { timeoutMs: 30_000 })).stdout === 'ok\n';
  } catch {
    return false;
  }
}

async function startsFrom(c: TestCluster, snapshotId: string): Promise<boolean> {
  try {
    const s = await Sandbox.create(snapshotId, opts(c));
    const ok = (await s.commands.run('cat /home/user/chaos.txt', { timeoutMs: 30_000 })).exitCode === 0;
    await s.kill();
    return ok;
  } catch {
    return false;
  }
}

/** The scheduler's bindings in Redis: sandbox id → node id. */
function bindings(): Map<string, string> {
  const cli = (args: string[]) =>
    spawnSync('redis-cli', ['-p', '19902', '--raw', ...args], { encoding: 'utf8' }).stdout ?? '';
  const keys = cli(['--scan', '--pattern', 'aenv:sched:b:*']).split('\n').filter(Boolean);
  const out = new Map<string, string>();
  if (!keys.length) return out;
  const values = cli(['MGET', ...keys]).split('\n');
  keys.forEach((k, i) => {
    try {
      const b = JSON.parse(values[i] ?? '') as { sandboxId: string; nodeId: string };
      out.set(b.sandboxId, b.nodeId);
    } catch {
      // expired between the scan and the read
    }
  });
  return out;
}

/** What the test cluster's nodes left on the machine once stopped. */
function leftovers(): string[] {
  const rules = execFileSync('iptables-save', [], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.includes('AENV-h9'));
  return [...leftBehind(['aenv-h9'], [TEST_CLUSTER_HOME, '/run/aenv-h9']), ...rules];
}
