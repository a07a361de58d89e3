/**
 * A node as the dashboard shows it. A node's GET /nodes and a gateway's (the scheduler's view
 * of every node) spell the same facts differently, so both are read here into one shape.
 */
export interface NodeView {
  nodeID: string;
  status: string;
  version: string;
  running: number;
  paused: number;
  starting: number;
  cpuCount: number;
  cpuLoad1m: number;
  allocatedCPU: number;
  /** Nominal: what the node's non-paused sandboxes were given. */
  allocatedMemoryMiB: number;
  /** Measured on the host. */
  memoryUsedMiB: number;
  memoryTotalMiB: number;
  memoryFreeMiB: number;
  /** Cached captures (bytes when the node says, else a count of entries). */
  cacheBytes?: number;
  cacheEntries?: number;
  draining: boolean;
}

type Raw = Record<string, unknown>;

const num = (...vs: unknown[]): number => {
  for (const v of vs) {
    const n = typeof v === 'string' ? Number(v) : v;
    if (typeof n === 'number' && Number.isFinite(n)) return n;
  }
  return 0;
};
const str = (...vs: unknown[]): string => {
  for (const v of vs) if (typeof v === 'string' && v) return v;
  return '';
};
const obj = (v: unknown): Raw => (v && typeof v === 'object' ? (v as Raw) : {});

/** `NODE_STATUS_READY` or `ready` → `ready`. */
export function statusName(s: string): string {
  return s.replace(/^NODE_STATUS_/, '').toLowerCase() || 'unknown';
}

export function normalizeNode(raw: Raw): NodeView {
  const ref = obj(raw.ref);
  const load = obj(raw.load);
  const cap = obj(raw.capacity);
  const total = num(raw.memoryTotalMiB, cap.memoryTotalMib, cap.memory_total_mib);
  const used = num(raw.memoryUsedMiB, load.memoryUsedMib, load.memory_used_mib);
  const free = num(raw.memoryFreeMiB, load.memoryFreeMib, load.memory_free_mib) || Math.max(0, total - used);
  const status = statusName(str(raw.status));
  const cacheKeys = raw.cacheKeyCount ?? raw.cache_key_count;
  return {
    nodeID: str(raw.nodeID, raw.nodeId, ref.nodeId, ref.node_id),
    status,
    version: str(raw.version),
    running: num(raw.sandboxCount, load.runningCount, load.running_count),
    paused: num(raw.pausedSandboxCount, load.pausedCount, load.paused_count),
    starting: num(raw.startingSandboxCount, load.startsInFlight, load.starts_in_flight),
    cpuCount: num(raw.cpuCount, cap.cpuCount, cap.cpu_count),
    cpuLoad1m: num(raw.cpuLoad1m, load.cpuLoad1m, load.cpu_load_1m),
    allocatedCPU: num(raw.allocatedCPU, load.allocatedCpu, load.allocated_cpu),
    allocatedMemoryMiB: num(raw.allocatedMemoryMiB, load.allocatedMemoryMib, load.allocated_memory_mib),
    memoryUsedMiB: used,
    memoryTotalMiB: total,
    memoryFreeMiB: free,
    ...(cacheKeys !== undefined ? { cacheEntries: num(cacheKeys) } : {}),
    draining: status === 'draining',
  };
}
