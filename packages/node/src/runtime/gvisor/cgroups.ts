import { mkdir, readFile, readdir, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CpuUse } from '../driver.js';
import { readRunnableNs } from './schedstat.js';

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
  /** Usage minus the inactive file cache the kernel reclaims first: what the sandbox really holds. */
  workingSetBytes: number | null;
  memoryLimitBytes: number | null;
  pids: number | null;
}

/** One counter of a memory.stat file (`name value` lines). */
function statField(text: string, name: string): number | null {
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

function workingSet(usage: number | null, inactiveFile: number | null): number | null {
  if (usage === null) return null;
  return Math.max(0, usage - (inactiveFile ?? 0));
}

/** The cgroup's cumulative CPU time in nanoseconds (one file read), null when unreadable. */
export async function readCgroupCpuNs(layout: CgroupLayout, cgroupsPath: string): Promise<number | null> {
  if (layout === 'v1') return readNumber(join(CGROUP_ROOT, 'cpuacct', cgroupsPath, 'cpuacct.usage'));
  const cpuStat = await readFile(join(CGROUP_ROOT, cgroupsPath, 'cpu.stat'), 'utf8').catch(() => '');
  const usec = /usage_usec (\d+)/.exec(cpuStat)?.[1];
  return usec ? Number(usec) * 1000 : null;
}

/**
 * The most host threads whose runnable time is read for one sandbox (an idle one has ~25): past
 * it, sandbox code that starts threads would make the node read that many files each second.
 */
export const MAX_THREADS_READ = 1024;

/**
 * The cgroup's CPU time and, with `threads`, how long each of its threads was runnable (none
 * past MAX_THREADS_READ: the caller then cannot tell); null when unreadable.
 */
export async function readCgroupCpuUse(
  layout: CgroupLayout,
  cgroupsPath: string,
  threads: boolean,
): Promise<CpuUse | null> {
  const [cpuNs, tids] = await Promise.all([
    readCgroupCpuNs(layout, cgroupsPath),
    threads ? cgroupThreads(layout, cgroupsPath) : [],
  ]);
  if (cpuNs === null) return null;
  return { cpuNs, runnableNs: await readRunnableNs(tids.length > MAX_THREADS_READ ? [] : tids) };
}

export async function readCgroupUsage(layout: CgroupLayout, cgroupsPath: string): Promise<CgroupUsage> {
  if (layout === 'v2') {
    const dir = join(CGROUP_ROOT, cgroupsPath);
    const memoryBytes = await readNumber(join(dir, 'memory.current'));
    const memStat = await readFile(join(dir, 'memory.stat'), 'utf8').catch(() => '');
    return {
      cpuNs: await readCgroupCpuNs(layout, cgroupsPath),
      memoryBytes,
      workingSetBytes: workingSet(memoryBytes, statField(memStat, 'inactive_file')),
      memoryLimitBytes: await readNumber(join(dir, 'memory.max')),
      pids: await readNumber(join(dir, 'pids.current')),
    };
  }
  const at = (ctrl: string, file: string) => join(CGROUP_ROOT, ctrl, cgroupsPath, file);
  const memoryBytes = await readNumber(at('memory', 'memory.usage_in_bytes'));
  const memStat = await readFile(at('memory', 'memory.stat'), 'utf8').catch(() => '');
  return {
    cpuNs: await readCgroupCpuNs(layout, cgroupsPath),
    memoryBytes,
    workingSetBytes: workingSet(memoryBytes, statField(memStat, 'total_inactive_file')),
    memoryLimitBytes: await readNumber(at('memory', 'memory.limit_in_bytes')),
    pids: await readNumber(at('pids', 'pids.current')),
  };
}

/** Host pids of every process of the sandbox (sentry and gofer). */
export function cgroupPids(layout: CgroupLayout, cgroupsPath: string): Promise<number[]> {
  return cgroupIds(layout, cgroupsPath, 'cgroup.procs');
}

/** Host thread ids of every thread of the sandbox's processes (the systrap stubs running guest code too). */
export function cgroupThreads(layout: CgroupLayout, cgroupsPath: string): Promise<number[]> {
  return cgroupIds(layout, cgroupsPath, layout === 'v2' ? 'cgroup.threads' : 'tasks');
}

async function cgroupIds(layout: CgroupLayout, cgroupsPath: string, file: string): Promise<number[]> {
  const dir = layout === 'v2' ? join(CGROUP_ROOT, cgroupsPath) : join(CGROUP_ROOT, 'memory', cgroupsPath);
  const text = await readFile(join(dir, file), 'utf8').catch(() => '');
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

/**
 * Freezes or thaws every process of a cgroup (v1 freezer, v2 cgroup.freeze) and waits until the
 * kernel reports the new state. A frozen sandbox uses no CPU at all, its memory stays as it was.
 */
export async function setFrozen(
  layout: CgroupLayout,
  cgroupsPath: string,
  frozen: boolean,
  timeoutMs = 5000,
): Promise<void> {
  const v2 = layout === 'v2';
  const dir = v2 ? join(CGROUP_ROOT, cgroupsPath) : join(CGROUP_ROOT, 'freezer', cgroupsPath);
  await writeFile(
    join(dir, v2 ? 'cgroup.freeze' : 'freezer.state'),
    v2 ? (frozen ? '1' : '0') : frozen ? 'FROZEN' : 'THAWED',
  );
  const done = async () => {
    if (v2)
      return (
        /^frozen (\d)$/m.exec(await readFile(join(dir, 'cgroup.events'), 'utf8'))?.[1] ===
        (frozen ? '1' : '0')
      );
    return (await readFile(join(dir, 'freezer.state'), 'utf8')).trim() === (frozen ? 'FROZEN' : 'THAWED');
  };
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline)
      throw new Error(`cgroup ${cgroupsPath} did not become ${frozen ? 'frozen' : 'thawed'}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Whether the cgroup is frozen (false when it does not exist). */
export async function isFrozen(layout: CgroupLayout, cgroupsPath: string): Promise<boolean> {
  if (layout === 'v2') {
    const ev = await readFile(join(CGROUP_ROOT, cgroupsPath, 'cgroup.events'), 'utf8').catch(() => '');
    return /^frozen 1$/m.test(ev);
  }
  const st = await readFile(join(CGROUP_ROOT, 'freezer', cgroupsPath, 'freezer.state'), 'utf8').catch(
    () => '',
  );
  return st.trim() !== '' && st.trim() !== 'THAWED';
}

/**
 * Thaws every frozen cgroup directly under `parent` (one per sandbox); returns their names. A
 * failure is left for the caller's teardown of that sandbox, which thaws it once more.
 */
export async function thawChildren(layout: CgroupLayout, parent: string): Promise<string[]> {
  const dir = layout === 'v2' ? join(CGROUP_ROOT, parent) : join(CGROUP_ROOT, 'freezer', parent);
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const thawed: string[] = [];
  for (const e of entries) {
    const path = join('/', parent, e.name);
    if (!e.isDirectory() || !(await isFrozen(layout, path))) continue;
    await setFrozen(layout, path, false).then(
      () => thawed.push(e.name),
      () => undefined,
    );
  }
  return thawed;
}

/**
 * Makes sure a v1 cpuset parent has CPUs and memory nodes before sandboxes pinned below it start:
 * a new cpuset directory starts empty, a child must be a subset of its parent, and runsc fills
 * the parents it creates only when the spec names no CPUs. v2 needs nothing (empty = inherit).
 */
export async function ensureCpusetParent(layout: CgroupLayout, parent: string): Promise<void> {
  if (layout === 'v2') return;
  const root = join(CGROUP_ROOT, 'cpuset');
  const dir = join(root, parent);
  await mkdir(dir, { recursive: true });
  for (const file of ['cpuset.cpus', 'cpuset.mems']) {
    if ((await readFile(join(dir, file), 'utf8')).trim()) continue;
    await writeFile(join(dir, file), (await readFile(join(root, file), 'utf8')).trim());
  }
}
