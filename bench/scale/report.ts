/** The scale bench's results as Markdown tables, and where each configuration saturates. */
import type { PhaseRow, ScaleResult, Setup } from './run.js';

const f = (x: number | undefined, digits = 0) =>
  x === undefined || Number.isNaN(x) ? '–' : x.toFixed(digits);

function table(head: string[], rows: string[][]): string {
  return [head, head.map(() => '---'), ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

export function setupTable(setups: readonly Setup[]): string {
  return table(
    [
      'store',
      'nodes',
      'sandboxes',
      'join s',
      'heartbeats/s',
      'hb p99 ms',
      'CPU ms/heartbeat',
      'sched CPU %',
      'redis CPU %',
      'redis ops/s',
      'RSS MiB',
      'KiB/node',
      'B/sandbox',
      'redis MiB',
    ],
    setups.map((s) => [
      s.store,
      String(s.nodes),
      String(s.sandboxes),
      f(s.joinMs / 1000, 1),
      `${f(s.heartbeatsPerSec)}${s.heartbeatErrors ? ` (${s.heartbeatErrors} failed)` : ''}`,
      f(s.heartbeatP99Ms, 1),
      f(s.cpuMsPerHeartbeat, 2),
      f(s.schedulerCpuPct),
      f(s.redisCpuPct),
      f(s.redisOpsPerSec),
      f(s.rssMib),
      f(s.rssKibPerNode, 1),
      f(s.rssBytesPerSandbox),
      f(s.redisMib),
    ]),
  );
}

export function phaseTable(rows: readonly PhaseRow[]): string {
  return table(
    [
      'store',
      'nodes',
      'flow',
      'clients',
      'placements/s',
      'p50 ms',
      'p99 ms',
      'errors',
      'sched CPU %',
      'load-gen CPU %',
      'redis CPU %',
      'redis ops/placement',
      'heartbeats/s',
      'hb p99 ms',
    ],
    rows.map((r) => [
      r.store,
      String(r.nodes),
      r.flow,
      String(r.clients),
      f(r.placementsPerSec),
      f(r.p50Ms, 2),
      f(r.p99Ms, 2),
      r.errors ? `${r.errors} (${r.firstError?.slice(0, 60)})` : '0',
      f(r.schedulerCpuPct),
      f(r.loadCpuPct),
      f(r.redisCpuPct),
      f(r.redisOpsPerPlacement, 1),
      f(r.heartbeatsPerSec),
      f(r.heartbeatP99Ms, 1),
    ]),
  );
}

/**
 * Per store, size and flow: the most placements per second seen and at how many clients; more
 * clients than that only queue (latency grows, throughput does not).
 */
export function saturation(rows: readonly PhaseRow[]): string[] {
  const groups = new Map<string, PhaseRow[]>();
  for (const r of rows) {
    const key = `${r.store} store, ${r.nodes} nodes, ${r.flow}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return [...groups].map(([key, rs]) => {
    const best = rs.reduce((a, b) => (b.placementsPerSec > a.placementsPerSec ? b : a));
    const cpu = best.schedulerCpuPct >= 90 ? 'scheduler CPU-bound' : 'scheduler not CPU-bound';
    return `${key}: peaks at ${f(best.placementsPerSec)} placements/s with ${best.clients} clients (p99 ${f(best.p99Ms, 2)} ms; ${cpu} at ${f(best.schedulerCpuPct)} %, load generator ${f(best.loadCpuPct)} %)`;
  });
}

export function report(r: ScaleResult): string {
  return [
    '### At rest (heartbeats only)',
    '',
    setupTable(r.setups),
    '',
    '### Placements',
    '',
    phaseTable(r.phases),
    '',
    '### Saturation',
    '',
    ...saturation(r.phases).map((l) => `- ${l}`),
  ].join('\n');
}
