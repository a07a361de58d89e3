import { access, constants } from 'node:fs/promises';
import { type CgroupLayout, detectCgroupLayout } from './cgroups.js';
import { DEFAULT_REAPER_PATH, reaperAvailable } from './reaper.js';
import { runCommand } from './runsc.js';
import { parseRunscVersion, runscVersionProblem, RUNSC_FIX } from './version.js';

/** What the gVisor driver learned about the host once, at init. */
export interface GvisorHost {
  readonly runscPath: string;
  readonly runscVersion: string;
  readonly cgroups: CgroupLayout;
  /** /proc/sys/net/core/rmem_default is visible outside the root netns (see wrapForNetSysctlQuirk). */
  readonly netSysctlQuirk: boolean;
  /** aenv-reaper, when built (see reaper.ts); null: sandboxes are re-parented to PID 1. */
  readonly reaperPath: string | null;
}

async function which(cmd: string): Promise<string | null> {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) {
    const p = `${dir}/${cmd}`;
    if (
      await access(p, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return p;
  }
  return null;
}

/**
 * runsc decides "root network namespace" by whether rmem_default exists; check what it would see
 * in a fresh namespace rather than assuming the kernel's behaviour.
 */
async function detectNetSysctlQuirk(): Promise<boolean> {
  const r = await runCommand(
    ['unshare', '--net', '--', '/bin/sh', '-c', 'test -e /proc/sys/net/core/rmem_default'],
    {
      timeoutMs: 10_000,
    },
  );
  return r.code === 0;
}

/** Resolves the host facts, or a reason (with the fix) why gVisor cannot run here. */
export async function inspectGvisorHost(
  runscPath?: string,
  reaperPath: string = DEFAULT_REAPER_PATH,
): Promise<GvisorHost | { problem: string }> {
  if (process.getuid?.() !== 0)
    return { problem: 'the gvisor driver needs root (namespaces, cgroups, mounts)' };
  const runsc = runscPath ?? (await which('runsc'));
  if (!runsc) return { problem: `runsc is not installed; ${RUNSC_FIX}` };
  const out = await runCommand([runsc, '--version'], { timeoutMs: 10_000 }).catch((e: Error) => ({
    code: -1,
    stdout: '',
    stderr: e.message,
    timedOut: false,
  }));
  const version = parseRunscVersion(out.stdout);
  const problem = runscVersionProblem(version, out.stdout + out.stderr);
  if (problem || !version) return { problem: problem ?? 'unreachable' };
  for (const tool of ['unshare', 'mount', 'umount']) {
    if (!(await which(tool))) return { problem: `${tool} is missing (util-linux / mount packages)` };
  }
  const cgroups = await detectCgroupLayout();
  if (!cgroups) return { problem: 'no cgroup filesystem at /sys/fs/cgroup' };
  return {
    runscPath: runsc,
    runscVersion: version.raw,
    cgroups,
    netSysctlQuirk: await detectNetSysctlQuirk(),
    reaperPath: (await reaperAvailable(reaperPath)) ? reaperPath : null,
  };
}
