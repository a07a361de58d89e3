import { readFile } from 'node:fs/promises';
import { cgroupPids, setFrozen, type CgroupLayout } from './cgroups.js';

/** False once the process is gone or a zombie (it has then released its memory and files). */
export async function isRunning(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie still answers kill(0); its state letter says it is gone.
  const st = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return st !== '' && !/^\d+ \(.*\) [ZX] /.test(st);
}

/**
 * Kills every process of a sandbox at once (sentry, gofer, systrap stubs: all in its cgroup)
 * and waits until none runs any more. The sandbox is then unreachable, its memory is back with
 * the kernel and its network namespace is no longer used; only runsc's state, the cgroups,
 * mounts and the bundle are left, for `release`.
 *
 * A frozen cgroup is thawed after the signal: frozen tasks only die once they run again, and a
 * killed task runs no code of its own.
 */
export async function stopProcesses(
  layout: CgroupLayout,
  cgroupsPath: string,
  knownPid: number | null,
  timeoutMs = 10_000,
): Promise<boolean> {
  const pids = new Set(await cgroupPids(layout, cgroupsPath));
  if (knownPid) pids.add(knownPid);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await setFrozen(layout, cgroupsPath, false).catch(() => undefined);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const running = await Promise.all([...pids].map(isRunning));
    if (!running.includes(true)) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Sum of the processes' proportional set sizes (smaps_rollup), or null when none could be read. */
export async function pssBytes(pids: readonly number[]): Promise<number | null> {
  let kb = 0;
  let read = 0;
  for (const pid of pids) {
    const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
    const m = /^Pss:\s+(\d+) kB/m.exec(text);
    if (!m) continue;
    kb += Number(m[1]);
    read++;
  }
  return read ? kb * 1024 : null;
}
