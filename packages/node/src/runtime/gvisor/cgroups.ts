import { readFile, readdir, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

const CGROUP_ROOT = '/sys/fs/cgroup';

export type CgroupLayout = 'v1' | 'v2';

/**
 * runsc uses cgroup v1 whenever /sys/fs/cgroup is not itself a cgroup2 mount (the hybrid layout
 * of these machines: v1 controllers plus a v2 mount at /sys/fs/cgroup/unified).
 */
export async function detectCgroupLayout(): Promise<CgroupLayout | null> {
  if (await exists(join(CGROUP_ROOT, 'cgroup.controllers'))) return 'v2';
  if (await exists(join(CGROUP_ROOT, 'memory'))) return 'v1';
  return null;
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

async function readNumber(p: string): Promise<number | null> {
  try {
    const text = (await readFile(p, 'utf8')).trim();
    if (text === 'max') return Number.POSITIVE_INFINITY;
    const n = Number(text.split(/\s+/)[0]);
    return Number.isFinite(n) ? n : null;
  } catch {
    return null;
  }
}

/** The directories of one cgroup path, one per v1 controller hierarchy (or the single v2 one). */
export async function cgroupDirs(layout: CgroupLayout, cgroupsPath: string): Promise<string[]> {
  if (layout === 'v2') return [join(CGROUP_ROOT, cgroupsPath)];
  const hierarchies = await readdir(CGROUP_ROOT).catch(() => [] as string[]);
  return hierarchies.filter((h) => h !== 'unified').map((h) => join(CGROUP_ROOT, h, cgroupsPath));
}

export interface CgroupUsage {
  cpuNs: number | null;
  memoryBytes: number | null;
  memoryLimitBytes: number | null;
  pids: number | null;
}

export async function readCgroupUsage(layout: CgroupLayout, cgroupsPath: string): Promise<CgroupUsage> {
  if (layout === 'v2') {
    const dir = join(CGROUP_ROOT, cgroupsPath);
    const cpuStat = await readFile(join(dir, 'cpu.stat'), 'utf8').catch(() => '');
    const usec = /usage_usec (\d+)/.exec(cpuStat)?.[1];
    return {
      cpuNs: usec ? Number(usec) * 1000 : null,
      memoryBytes: await readNumber(join(dir, 'memory.current')),
      memoryLimitBytes: await readNumber(join(dir, 'memory.max')),
      pids: await readNumber(join(dir, 'pids.current')),
    };
  }
  const at = (ctrl: string, file: string) => join(CGROUP_ROOT, ctrl, cgroupsPath, file);
  return {
    cpuNs: await readNumber(at('cpuacct', 'cpuacct.usage')),
    memoryBytes: await readNumber(at('memory', 'memory.usage_in_bytes')),
    memoryLimitBytes: await readNumber(at('memory', 'memory.limit_in_bytes')),
    pids: await readNumber(at('pids', 'pids.current')),
  };
}

/** Host pids of every process of the sandbox (sentry and gofer). */
export async function cgroupPids(layout: CgroupLayout, cgroupsPath: string): Promise<number[]> {
  const dir = layout === 'v2' ? join(CGROUP_ROOT, cgroupsPath) : join(CGROUP_ROOT, 'memory', cgroupsPath);
  const text = await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
}

/**
 * Removes cgroup directories runsc left behind (it normally removes them on delete, but not when
 * it was killed mid-way). Only empty cgroups can be removed; failures are returned, not thrown.
 */
export async function removeCgroups(layout: CgroupLayout, cgroupsPath: string): Promise<string[]> {
  const left: string[] = [];
  for (const dir of await cgroupDirs(layout, cgroupsPath)) {
    try {
      await rmdir(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') left.push(dir);
    }
  }
  return left;
}

export async function cgroupExists(layout: CgroupLayout, cgroupsPath: string): Promise<boolean> {
  for (const dir of await cgroupDirs(layout, cgroupsPath)) if (await exists(dir)) return true;
  return false;
}
