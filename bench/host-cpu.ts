/** CPU use of processes and of the whole machine, from /proc, for the benchmarks. */
import { readFile, readdir } from 'node:fs/promises';

/** Clock ticks a second (USER_HZ): what /proc/<pid>/stat and /proc/stat count in. */
const HZ = 100;

/** CPU time (s) a process used so far, user + system; 0 once it is gone. */
export async function processCpuSecs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11] ?? 0) + Number(f[12] ?? 0)) / HZ;
}

/** The processes under `pid` (children, grandchildren, …), by their parent pid in /proc. */
export async function descendants(pid: number): Promise<number[]> {
  const parents = new Map<number, number[]>();
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    parents.set(ppid, [...(parents.get(ppid) ?? []), Number(name)]);
  }
  const out: number[] = [];
  for (let todo = [pid]; todo.length;) {
    const kids = todo.flatMap((p) => parents.get(p) ?? []);
    out.push(...kids);
    todo = kids;
  }
  return out;
}

/** Busy CPU time (s) of the whole machine so far: every CPU's time that was not idle or iowait. */
export async function machineBusySecs(): Promise<number> {
  const cpu = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = cpu;
  return (user! + nice! + system! + irq! + softirq! + steal!) / HZ;
}

/** CPU time (s) a cgroup v1 cpuacct group used so far, its sub-groups included. */
export async function cgroupCpuSecs(group: string): Promise<number> {
  const ns = await readFile(`/sys/fs/cgroup/cpuacct/${group}/cpuacct.usage`, 'utf8').catch(() => '0');
  return Number(ns) / 1e9;
}

/** Samples `counters` before and after `ms`, and gives each one's use in % of one core. */
export async function cpuOver<K extends string>(
  ms: number,
  counters: Record<K, () => Promise<number>>,
): Promise<Record<K, number>> {
  const keys = Object.keys(counters) as K[];
  const read = () => Promise.all(keys.map((k) => counters[k]()));
  const a = await read();
  const t = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const b = await read();
  const secs = (performance.now() - t) / 1000;
  return Object.fromEntries(keys.map((k, i) => [k, (100 * (b[i]! - a[i]!)) / secs])) as Record<K, number>;
}
