import { readFile, statfs } from 'node:fs/promises';
import { cpus } from 'node:os';
import type { EnvdMetrics } from '@agentenv/protocol';

interface CpuTimes {
  busy: number;
  total: number;
}

/** Aggregate CPU times from the first line of /proc/stat. */
export function parseProcStat(text: string): CpuTimes {
  const fields = text.split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
}

/** Bytes from /proc/meminfo (values there are KiB). */
export function parseMeminfo(text: string): { total: number; used: number; cache: number } {
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0) * 1024;
  const total = kb('MemTotal');
  const available = kb('MemAvailable') || kb('MemFree');
  return { total, used: Math.max(0, total - available), cache: kb('Cached') };
}

/**
 * System usage inside the sandbox. CPU use is the busy share of the time since the previous
 * sample (the first sample compares against boot), which is what a periodic scraper wants.
 */
export class SystemMetrics {
  private last: CpuTimes | undefined;

  async sample(): Promise<Required<EnvdMetrics>> {
    const [stat, meminfo, disk] = await Promise.all([
      readFile('/proc/stat', 'utf8'),
      readFile('/proc/meminfo', 'utf8'),
      statfs('/'),
    ]);
    const now = parseProcStat(stat);
    const prev = this.last ?? { busy: 0, total: 0 };
    this.last = now;
    const dt = now.total - prev.total;
    const mem = parseMeminfo(meminfo);
    const diskTotal = disk.blocks * disk.bsize;
    return {
      ts: Math.floor(Date.now() / 1000),
      cpu_count: cpus().length,
      cpu_used_pct: dt > 0 ? Math.round(((now.busy - prev.busy) / dt) * 10000) / 100 : 0,
      mem_total: mem.total,
      mem_used: mem.used,
      mem_cache: mem.cache,
      disk_used: diskTotal - disk.bfree * disk.bsize,
      disk_total: diskTotal,
    };
  }
}
