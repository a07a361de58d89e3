import { readFile } from 'node:fs/promises';
import { cpus, freemem, loadavg, totalmem } from 'node:os';
import type { HostStats } from './report.js';

const MIB = 2 ** 20;

/** This host's CPUs, memory (MemAvailable from /proc/meminfo where there is one) and load. */
export async function hostStats(): Promise<HostStats> {
  const meminfo = await readFile('/proc/meminfo', 'utf8').catch(() => '');
  const kib = /^MemAvailable:\s+(\d+) kB/m.exec(meminfo)?.[1];
  return {
    cpuCount: cpus().length,
    memoryTotalMib: Math.round(totalmem() / MIB),
    memoryAvailableMib: Math.round(kib ? Number(kib) / 1024 : freemem() / MIB),
    loadAvg1m: loadavg()[0] ?? 0,
  };
}
