import { readFile } from 'node:fs/promises';

/**
 * Chooses host CPUs for sandboxes: each sandbox smaller than the host gets `cpuCount` CPUs of
 * its own cpuset, the least used ones at the time, so sandboxes spread across the cores instead
 * of all competing for whichever the scheduler picks. Pure bookkeeping: the driver writes the
 * result into the sandbox's OCI spec.
 */
export class CpuPlacer {
  private readonly load: Map<number, number>;

  constructor(readonly hostCpus: readonly number[]) {
    this.load = new Map(hostCpus.map((c) => [c, 0]));
  }

  /** CPUs for a new sandbox (sorted), or undefined when it may use every host CPU. */
  place(cpuCount: number): number[] | undefined {
    const n = Math.ceil(cpuCount);
    if (n >= this.hostCpus.length) return undefined;
    const chosen = [...this.load.entries()]
      .sort((a, b) => a[1] - b[1] || a[0] - b[0])
      .slice(0, n)
      .map(([cpu]) => cpu)
      .sort((a, b) => a - b);
    for (const c of chosen) this.load.set(c, (this.load.get(c) ?? 0) + 1);
    return chosen;
  }

  /** Gives back what `place` returned. */
  release(cpus: readonly number[] | undefined): void {
    for (const c of cpus ?? []) {
      const l = this.load.get(c);
      if (l) this.load.set(c, l - 1);
    }
  }

  /** Sandboxes placed on each CPU. */
  counts(): ReadonlyMap<number, number> {
    return this.load;
  }
}

/** Parses a kernel CPU list (`0-3,8,10-11`). */
export function parseCpuList(text: string): number[] {
  const out: number[] = [];
  for (const part of text.trim().split(',').filter(Boolean)) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`bad CPU list ${JSON.stringify(text)}`);
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    for (let c = lo; c <= hi; c++) out.push(c);
  }
  return out;
}

/** The CPUs sandboxes may be placed on: those online on the host. */
export async function hostCpus(): Promise<number[]> {
  return parseCpuList(await readFile('/sys/devices/system/cpu/online', 'utf8'));
}
