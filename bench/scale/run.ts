/**
 * The scheduler scale bench's core: for each store and cluster size it starts a real
 * redis-server (Redis store) and a real `aenv-scheduler` on loopback, forks load processes that
 * host the simulated nodes and the clients, and measures an idle phase (heartbeats only) and one
 * phase per flow and client count. Everything it starts is stopped before it returns or throws.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import {
  CLUSTER_KEY,
  startRedis,
  startSchedulerProcess,
  type RedisProcess,
  type SchedulerProcess,
} from '@agentenv/test-support/cluster';
import { percentile } from '../stats.js';
import { owner, type Flow, type FromLoad, type PhaseResult, type ToLoad } from './protocol.js';
import type { SimShape } from './sim-node.js';

export type Store = 'memory' | 'redis';

export interface ScaleOptions {
  nodes: number[];
  stores: Store[];
  flows: Flow[];
  /** Concurrent client loops per measured phase. */
  clients: number[];
  phaseMs: number;
  /** Load processes hosting the nodes and clients. */
  procs: number;
  intervalMs: number;
  shape: SimShape;
  schedulerPort: number;
  redisPort: number;
  /** Extra scheduler environment. */
  env?: Record<string, string>;
  log?: (line: string) => void;
}

/** What one cluster size costs at rest. */
export interface Setup {
  store: Store;
  nodes: number;
  sandboxes: number;
  joinMs: number;
  heartbeatsPerSec: number;
  heartbeatP99Ms: number;
  heartbeatErrors: number;
  /** Scheduler CPU per heartbeat (heartbeats only: no placements meanwhile). */
  cpuMsPerHeartbeat: number;
  schedulerCpuPct: number;
  redisCpuPct?: number;
  redisOpsPerSec?: number;
  rssMib: number;
  rssKibPerNode: number;
  rssBytesPerSandbox: number;
  redisMib?: number;
}

export interface PhaseRow {
  store: Store;
  nodes: number;
  flow: Flow;
  clients: number;
  placementsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  firstError?: string;
  schedulerCpuPct: number;
  loadCpuPct: number;
  redisCpuPct?: number;
  /** Redis commands per placement beyond what heartbeats alone cost. */
  redisOpsPerPlacement?: number;
  heartbeatsPerSec: number;
  heartbeatP99Ms: number;
}

export interface ScaleResult {
  setups: Setup[];
  phases: PhaseRow[];
}

const LOAD = fileURLToPath(new URL('./load.ts', import.meta.url));

export async function runScale(o: ScaleOptions): Promise<ScaleResult> {
  const out: ScaleResult = { setups: [], phases: [] };
  for (const store of o.stores)
    for (const nodes of o.nodes) {
      o.log?.(`${store} store, ${nodes} nodes: starting`);
      await withCluster(o, store, nodes, async (c) => {
        out.setups.push(await measureSetup(o, c, store, nodes));
        for (const flow of o.flows)
          for (const clients of o.clients) {
            const row = await measurePhase(o, c, store, nodes, flow, clients);
            o.log?.(
              `  ${flow} ${clients} clients: ${row.placementsPerSec.toFixed(0)}/s p99 ${row.p99Ms.toFixed(2)} ms`,
            );
            out.phases.push(row);
          }
      });
    }
  return out;
}

interface Cluster {
  scheduler: SchedulerProcess;
  redis?: { proc: RedisProcess; client: Redis };
  loads: ChildProcess[];
  rssBaseKib: number;
  redisBaseBytes: number;
  joinMs: number;
  idleOpsPerSec: number;
}

async function withCluster(
  o: ScaleOptions,
  store: Store,
  nodes: number,
  fn: (c: Cluster) => Promise<void>,
): Promise<void> {
  const stops: (() => Promise<void> | void)[] = [];
  try {
    let redis: Cluster['redis'];
    if (store === 'redis') {
      const proc = await startRedis(o.redisPort);
      stops.push(() => proc.stop());
      const client = new Redis(proc.url, { lazyConnect: true });
      await client.connect();
      stops.push(() => void client.disconnect());
      redis = { proc, client };
    }
    const scheduler = await startSchedulerProcess({
      port: o.schedulerPort,
      store: redis?.proc.url ?? 'memory',
      heartbeatIntervalMs: o.intervalMs,
      env: { AENV_LOG_LEVEL: 'error', ...o.env },
    });
    stops.push(() => scheduler.stop());
    const rssBaseKib = rssKib(scheduler.child.pid!);
    const redisBaseBytes = redis ? await redisMemory(redis.client) : 0;
    const loads: ChildProcess[] = [];
    stops.push(() => stopLoads(loads));
    const t0 = Date.now();
    await startLoads(o, scheduler.url, nodes, loads);
    const c: Cluster = {
      scheduler,
      ...(redis ? { redis } : {}),
      loads,
      rssBaseKib,
      redisBaseBytes,
      joinMs: Date.now() - t0,
      idleOpsPerSec: 0,
    };
    await fn(c);
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
}

async function startLoads(o: ScaleOptions, url: string, nodes: number, loads: ChildProcess[]): Promise<void> {
  for (let proc = 0; proc < o.procs; proc++) {
    const child = fork(LOAD, [], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    loads.push(child);
    child.on('message', (m: FromLoad) => {
      if (m.type !== 'started') return;
      const by = new Map<number, Started>();
      for (const item of m.items) {
        const to = owner(item[0], o.procs);
        if (!by.has(to)) by.set(to, []);
        by.get(to)!.push(item);
      }
      for (const [to, items] of by) loads[to]!.send({ type: 'started', items } satisfies ToLoad);
    });
  }
  await Promise.all(
    loads.map((child, proc) => {
      const joined = next(child, 'joined');
      child.send({
        type: 'init',
        url,
        apiKey: CLUSTER_KEY,
        nodes,
        procs: o.procs,
        proc,
        intervalMs: o.intervalMs,
        shape: o.shape,
      } satisfies ToLoad);
      return joined;
    }),
  );
}

type Started = [number, string, string][];

/** The next message of a type from a load process; its exit first is an error. */
function next<T extends FromLoad['type']>(
  child: ChildProcess,
  type: T,
): Promise<Extract<FromLoad, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: FromLoad) => {
      if (m.type !== type) return;
      child.off('message', onMessage).off('exit', onExit);
      resolve(m as Extract<FromLoad, { type: T }>);
    };
    const onExit = (code: number | null) => {
      child.off('message', onMessage);
      reject(new Error(`a load process exited (${code}) before '${type}'`));
    };
    child.on('message', onMessage).once('exit', onExit);
  });
}

async function stopLoads(loads: ChildProcess[]): Promise<void> {
  await Promise.all(
    loads.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      if (child.connected) child.send({ type: 'stop' } satisfies ToLoad);
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }),
  );
}

/** Runs a phase in every load process (clients split over them) and sums what they measured. */
async function phase(c: Cluster, o: ScaleOptions, flow: Flow, clients: number): Promise<PhaseResult[]> {
  return Promise.all(
    c.loads.map((child, i) => {
      const done = next(child, 'result');
      const share = Math.floor(clients / o.procs) + (i < clients % o.procs ? 1 : 0);
      child.send({ type: 'phase', clients: share, ms: o.phaseMs, flow } satisfies ToLoad);
      return done;
    }),
  );
}

interface Usage {
  wallMs: number;
  schedulerCpuMs: number;
  redisCpuMs: number;
  redisOps: number;
}

async function usage(c: Cluster): Promise<Usage> {
  const r = c.redis ? await redisStats(c.redis.client) : { cpuMs: 0, ops: 0 };
  return {
    wallMs: performance.now(),
    schedulerCpuMs: cpuMs(c.scheduler.child.pid!),
    redisCpuMs: r.cpuMs,
    redisOps: r.ops,
  };
}

async function measured(c: Cluster, o: ScaleOptions, flow: Flow, clients: number) {
  const before = await usage(c);
  const results = await phase(c, o, flow, clients);
  const after = await usage(c);
  const secs = (after.wallMs - before.wallMs) / 1000;
  const all = (f: (r: PhaseResult) => number[]) => results.flatMap(f);
  const sum = (f: (r: PhaseResult) => number) => results.reduce((a, r) => a + f(r), 0);
  return {
    secs,
    placements: sum((r) => r.placements),
    errors: sum((r) => r.errors),
    firstError: results.find((r) => r.firstError)?.firstError,
    latencies: all((r) => r.latenciesMs),
    heartbeats: sum((r) => r.heartbeats),
    heartbeatErrors: sum((r) => r.heartbeatErrors),
    heartbeatLatencies: all((r) => r.heartbeatLatenciesMs),
    loadCpuMs: sum((r) => r.cpuMs),
    schedulerCpuMs: after.schedulerCpuMs - before.schedulerCpuMs,
    redisCpuMs: after.redisCpuMs - before.redisCpuMs,
    redisOps: after.redisOps - before.redisOps,
  };
}

const p = (xs: number[], q: number) => (xs.length ? percentile(xs, q) : NaN);
const pct = (ms: number, secs: number) => ms / (secs * 10);

async function measureSetup(o: ScaleOptions, c: Cluster, store: Store, nodes: number): Promise<Setup> {
  const m = await measured(c, o, 'schedule', 0);
  const rss = rssKib(c.scheduler.child.pid!);
  const sandboxes = nodes * o.shape.rosterSize;
  c.idleOpsPerSec = m.redisOps / m.secs;
  const redisBytes = c.redis ? await redisMemory(c.redis.client) : 0;
  return {
    store,
    nodes,
    sandboxes,
    joinMs: c.joinMs,
    heartbeatsPerSec: m.heartbeats / m.secs,
    heartbeatP99Ms: p(m.heartbeatLatencies, 99),
    heartbeatErrors: m.heartbeatErrors,
    cpuMsPerHeartbeat: m.schedulerCpuMs / Math.max(1, m.heartbeats),
    schedulerCpuPct: pct(m.schedulerCpuMs, m.secs),
    ...(c.redis
      ? {
          redisCpuPct: pct(m.redisCpuMs, m.secs),
          redisOpsPerSec: m.redisOps / m.secs,
          redisMib: redisBytes / 2 ** 20,
        }
      : {}),
    rssMib: rss / 1024,
    rssKibPerNode: (rss - c.rssBaseKib) / nodes,
    rssBytesPerSandbox: ((rss - c.rssBaseKib) * 1024) / sandboxes,
  };
}

async function measurePhase(
  o: ScaleOptions,
  c: Cluster,
  store: Store,
  nodes: number,
  flow: Flow,
  clients: number,
): Promise<PhaseRow> {
  const m = await measured(c, o, flow, clients);
  return {
    store,
    nodes,
    flow,
    clients,
    placementsPerSec: m.placements / m.secs,
    p50Ms: p(m.latencies, 50),
    p99Ms: p(m.latencies, 99),
    errors: m.errors,
    ...(m.firstError ? { firstError: m.firstError } : {}),
    schedulerCpuPct: pct(m.schedulerCpuMs, m.secs),
    loadCpuPct: pct(m.loadCpuMs, m.secs),
    ...(c.redis
      ? {
          redisCpuPct: pct(m.redisCpuMs, m.secs),
          redisOpsPerPlacement: (m.redisOps - c.idleOpsPerSec * m.secs) / Math.max(1, m.placements),
        }
      : {}),
    heartbeatsPerSec: m.heartbeats / m.secs,
    heartbeatP99Ms: p(m.heartbeatLatencies, 99),
  };
}

/** User + system CPU of a process so far, from /proc (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function rssKib(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0);
}

/** Redis's own CPU so far and the commands it ran (INFO's own calls left out). */
async function redisStats(r: Redis): Promise<{ cpuMs: number; ops: number }> {
  const info = await r.info('all');
  const num = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  let ops = 0;
  for (const m of info.matchAll(/^cmdstat_([a-z|_-]+):calls=(\d+)/gm))
    if (m[1] !== 'info') ops += Number(m[2]);
  return { cpuMs: (num('used_cpu_sys') + num('used_cpu_user')) * 1000, ops };
}

async function redisMemory(r: Redis): Promise<number> {
  const info = await r.info('memory');
  return Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0);
}
