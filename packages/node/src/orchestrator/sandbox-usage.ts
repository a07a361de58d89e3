import type { EnvdMetrics } from '@agentenv/protocol';

/** One sample of a sandbox's usage, in E2B's units (bytes, percent, unix seconds). */
export interface UsageSample {
  ts: number;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  memCache: number;
  diskUsed: number;
  diskTotal: number;
}

const MIB = 1024 * 1024;

/**
 * A sandbox's usage as E2B reports it, from what envd sees inside gVisor. envd's totals are
 * the kernel's view: with the writable layer held in the sandbox's memory, /proc/meminfo's total
 * is memory plus disk and counts the layer's files as used memory and page cache, and statfs of
 * `/` reports an unbounded size (its used blocks are the layer's). So totals come from the
 * sandbox's size, disk use from the driver when it can measure the layer (else envd's statfs),
 * and the layer is taken out of the memory figures when it lives in memory.
 */
export function sandboxUsage(
  raw: EnvdMetrics,
  size: { memoryMB: number; diskSizeMB: number },
  layerBytes: number | null,
): UsageSample {
  const memTotal = size.memoryMB * MIB;
  const diskUsed = Math.max(0, layerBytes ?? raw.disk_used);
  const layerInMemory = raw.mem_total > memTotal;
  const minusLayer = (v: number) => Math.min(memTotal, Math.max(0, layerInMemory ? v - diskUsed : v));
  return {
    ts: raw.ts,
    cpuCount: raw.cpu_count,
    cpuUsedPct: raw.cpu_used_pct,
    memUsed: minusLayer(raw.mem_used),
    memTotal,
    memCache: minusLayer(raw.mem_cache ?? 0),
    diskUsed,
    diskTotal: size.diskSizeMB * MIB,
  };
}
