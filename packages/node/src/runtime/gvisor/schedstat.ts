import { readFile } from 'node:fs/promises';

/**
 * Time a thread ran plus time it waited runnable for a CPU, in ns, from `/proc/<tid>/schedstat`
 * ("<run ns> <wait ns> <slices>"); null when the text is not that.
 */
export function runnableNs(schedstat: string): number | null {
  const [run, wait] = schedstat.trim().split(/\s+/).map(Number);
  return Number.isFinite(run) && Number.isFinite(wait) ? run! + wait! : null;
}

/**
 * For each thread, how long it has been runnable (running or waiting for a CPU) since it
 * started. A thread that ended since the id list was read is left out.
 */
export async function readRunnableNs(tids: readonly number[]): Promise<Map<number, number>> {
  const texts = await Promise.all(tids.map((t) => readFile(`/proc/${t}/schedstat`, 'utf8').catch(() => '')));
  const out = new Map<number, number>();
  tids.forEach((t, i) => {
    const ns = runnableNs(texts[i]!);
    if (ns !== null) out.set(t, ns);
  });
  return out;
}
