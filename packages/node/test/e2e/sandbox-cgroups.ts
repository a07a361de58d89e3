import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NODE_TAG as TAG } from '@agentenv/test-support/server';

const V2 = existsSync('/sys/fs/cgroup/cgroup.controllers');
/** Where the node's driver puts one cgroup per runtime sandbox (the freezer's, on cgroup v1). */
export const CGROUPS = V2 ? `/sys/fs/cgroup/aenv-${TAG}` : `/sys/fs/cgroup/freezer/aenv-${TAG}`;

/** The runtime sandboxes' cgroups now (pooled ones included), by directory name. */
export function cgroups(): Set<string> {
  if (!existsSync(CGROUPS)) return new Set();
  return new Set(
    readdirSync(CGROUPS, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name),
  );
}

/** Whether the cgroup freezer holds the sandbox's processes stopped. */
export function frozen(cgroup: string): boolean {
  const dir = join(CGROUPS, cgroup);
  if (V2) return /^frozen 1$/m.test(readFileSync(join(dir, 'cgroup.events'), 'utf8'));
  return readFileSync(join(dir, 'freezer.state'), 'utf8').trim() === 'FROZEN';
}

/** Pins the sandbox's processes to one host CPU (its cpuset). */
export function pinTo(cgroup: string, cpu: number): void {
  const dir = V2 ? join(CGROUPS, cgroup) : join('/sys/fs/cgroup/cpuset', `aenv-${TAG}`, cgroup);
  writeFileSync(join(dir, 'cpuset.cpus'), String(cpu));
}

/**
 * Loads one host CPU with `n` busy loops until stop(), each in a session of its own: the host's
 * scheduler shares a CPU between sessions, as it would between other tenants' sandboxes, so `n`
 * loops of one session would weigh as one.
 */
export function loadCpu(cpu: number, n: number): { stop(): void } {
  const loops = Array.from({ length: n }, () =>
    // `timeout` ends them if this process dies first; stop() kills each loop's process group.
    spawn('taskset', ['-c', String(cpu), 'timeout', '120', 'sh', '-c', 'while :; do :; done'], {
      detached: true,
      stdio: 'ignore',
    }),
  );
  let stopped = false;
  return {
    stop: () => {
      if (stopped) return;
      stopped = true;
      for (const l of loops) if (l.pid) process.kill(-l.pid, 'SIGKILL');
    },
  };
}

/** Each process of a sandbox (sentry, gofer) with its /proc/<pid>/ksm_stat fields. */
export function ksmStats(cgroup: string): Record<string, string>[] {
  const pids = readFileSync(join(CGROUPS, cgroup, 'cgroup.procs'), 'utf8')
    .split('\n')
    .filter(Boolean);
  return pids.map((pid) =>
    Object.fromEntries(
      readFileSync(`/proc/${pid}/ksm_stat`, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(/:?\s+/) as [string, string]),
    ),
  );
}
