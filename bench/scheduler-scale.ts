/**
 * Scheduler scale benchmark (issue 24): a real `aenv-scheduler` (memory store, and Redis store on
 * a real redis-server) against simulated nodes that speak scheduler.v1 over the wire as real
 * nodes do (a heartbeat every interval with the full roster and cache keys, lifecycle events),
 * while clients call Schedule as fast as the scheduler answers. For each store and cluster size it
 * prints heartbeat cost at rest, then per flow and client count: placements/s, Schedule p50/p99,
 * CPU of the scheduler, of Redis and of the load generator, Redis commands per placement, and
 * where throughput stops growing. Flows: `schedule` (Schedule only; reservations expire) and
 * `full` (each placement assigned and started on its node, whose roster and events then say so).
 * Loopback only; everything it starts is stopped when it ends. Ports 19240 (scheduler), 19241
 * (redis).
 *
 * Run: npx tsx bench/scheduler-scale.ts [--nodes 100,1000,10000] [--stores memory,redis]
 *        [--flows schedule,full] [--clients 8,32,128] [--seconds 5] [--procs 2] [--roster 100]
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { report } from './scale/report.js';
import { runScale, type Store } from './scale/run.js';
import type { Flow } from './scale/protocol.js';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '100,1000,10000' },
    stores: { type: 'string', default: 'memory,redis' },
    flows: { type: 'string', default: 'schedule,full' },
    clients: { type: 'string', default: '8,32,128' },
    seconds: { type: 'string', default: '5' },
    procs: { type: 'string', default: '2' },
    roster: { type: 'string', default: '100' },
    interval: { type: 'string', default: '2000' },
  },
});
const list = (s: string) => s.split(',').filter(Boolean);

const started = new Date().toISOString();
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
const loadBefore = load();
const result = await runScale({
  nodes: list(values.nodes).map(Number),
  stores: list(values.stores) as Store[],
  flows: list(values.flows) as Flow[],
  clients: list(values.clients).map(Number),
  phaseMs: Number(values.seconds) * 1000,
  procs: Number(values.procs),
  intervalMs: Number(values.interval),
  shape: { rosterSize: Number(values.roster), templates: 50, templatesPerNode: 5 },
  schedulerPort: 19240,
  redisPort: 19241,
  // Schedule-only placements are never assigned: their reservations go back after a second.
  env: { AENV_SCHEDULER_RESERVATION_TTL_MS: '1000' },
  log: (l) => console.error(l),
});
console.log(`AgentENV scheduler scale benchmark (${started}), ${values.seconds} s per phase`);
// The machine is shared: what else ran shows in its load average.
console.log(`load average before ${loadBefore}, after ${load()}\n`);
console.log(report(result));
