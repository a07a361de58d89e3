import { mkdir, open, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { InitProcess, ReadOnlyMount, Resources, SandboxNet, SandboxVolume } from '../driver.js';
import { InvalidRequestError, SandboxStartError } from '../errors.js';
import { newSandboxId } from '../ids.js';
import type { GvisorHost } from './host.js';
import type { DriverLayout } from './layout.js';
import { mountLayers, mountTmpfs } from './mounts.js';
import { buildOciSpec, resourcesProblem } from './oci-spec.js';
import { runDetached } from './reaper.js';
import { describeFailure, runscGlobalArgs, type RunscFlags } from './runsc.js';
import { bindVolumes, volumesMount } from './volumes.js';

/** Where the sandbox's private writable layer lives (both are inside the checkpoint image). */
export type UpperMedium =
  /** In the sentry's memory (`--overlay2=root:memory`); bounded only by the memory limit. */
  | 'memory'
  /** In a file on a per-sandbox tmpfs of diskSizeMB (`--overlay2=root:dir=`): writes past it get ENOSPC. */
  | 'tmpfs';

/** What a sandbox is booted from, whether fresh or from a capture. */
export interface BootPlan {
  readonly layers: readonly string[];
  readonly mounts: readonly ReadOnlyMount[];
  readonly volumes: readonly SandboxVolume[];
  readonly init: InitProcess;
  readonly hostname: string;
  readonly resources: Resources;
  readonly net?: SandboxNet;
  readonly envdPort: number;
  readonly readyTimeoutMs?: number;
  readonly restoredFrom?: string;
}

/** One sandbox's bundle directory, runsc flags and cgroup, before and while it runs. */
export interface Bundle {
  readonly id: string;
  readonly dir: string;
  readonly cgroupsPath: string;
  readonly flags: RunscFlags;
  /** The root directory runsc gets: the only layer, or a read-only merge of several. */
  readonly rootfs: string;
}

export const CONSOLE_LOG = 'console.log';
/** runsc writes the sandbox process's pid here (`--pid-file`). */
const PID_FILE = 'sandbox.pid';
const LAUNCH_TIMEOUT_MS = 60_000;

export function validateBoot(
  r: Resources,
  layers: readonly string[],
  mounts: readonly ReadOnlyMount[],
  port: number,
): void {
  const problem = resourcesProblem(r);
  if (problem) throw new InvalidRequestError(problem);
  if (layers.length === 0)
    throw new InvalidRequestError('a sandbox needs at least one root filesystem layer');
  for (const m of mounts) {
    if (!m.sandboxPath.startsWith('/'))
      throw new InvalidRequestError(`mount target ${m.sandboxPath} is not absolute`);
  }
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new InvalidRequestError(`bad envd port ${port}`);
}

export async function checkPaths(layers: readonly string[], mounts: readonly ReadOnlyMount[]): Promise<void> {
  for (const dir of [...layers, ...mounts.map((m) => m.hostPath)]) {
    const st = await stat(dir).catch(() => null);
    if (!st?.isDirectory()) throw new InvalidRequestError(`${dir} is not a directory`);
  }
}

/** The flags every runsc call for this sandbox repeats. */
export function sandboxFlags(
  layout: DriverLayout,
  id: string,
  o: { upper: UpperMedium; net: boolean; netDisconnectOk: boolean },
): RunscFlags {
  return {
    root: layout.runscRoot,
    overlay: o.upper === 'memory' ? 'root:memory' : `root:dir=${join(layout.bundleDir(id), 'upper')}`,
    network: o.net ? 'sandbox' : 'none',
    netDisconnectOk: o.netDisconnectOk,
  };
}

/**
 * Creates the bundle directory, the root filesystem view and the writable layer's store. On
 * failure `cleanup` gets what was made (the directory exists from the first step).
 */
export async function createBundle(
  layout: DriverLayout,
  plan: Pick<BootPlan, 'layers' | 'resources' | 'net' | 'volumes'>,
  o: { upper: UpperMedium; netDisconnectOk: boolean },
  cleanup: (b: Bundle) => Promise<void>,
): Promise<Bundle> {
  const id = newSandboxId();
  const dir = layout.bundleDir(id);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const multi = plan.layers.length > 1;
  const b: Bundle = {
    id,
    dir,
    cgroupsPath: layout.cgroupsPath(id),
    flags: sandboxFlags(layout, id, { ...o, net: plan.net !== undefined }),
    rootfs: multi ? join(dir, 'rootfs') : (plan.layers[0] ?? ''),
  };
  try {
    if (multi) {
      await mkdir(b.rootfs);
      await mountLayers(plan.layers, b.rootfs);
    }
    if (o.upper === 'tmpfs') {
      await mkdir(join(dir, 'upper'));
      await mountTmpfs(join(dir, 'upper'), plan.resources.diskSizeMB);
    }
    await bindVolumes(dir, plan.volumes);
  } catch (e) {
    await cleanup(b);
    throw new SandboxStartError('start_failed', `preparing sandbox ${id} failed: ${(e as Error).message}`);
  }
  return b;
}

export async function writeSpec(
  b: Bundle,
  plan: BootPlan,
  o: { upperInMemory: boolean; cpus?: readonly number[] },
): Promise<void> {
  const spec = buildOciSpec({
    rootfs: b.rootfs,
    init: plan.init,
    mounts: plan.mounts,
    volumes: volumesMount(b.dir),
    resources: plan.resources,
    netnsPath: plan.net?.netnsPath,
    hostname: plan.hostname,
    cgroupsPath: b.cgroupsPath,
    upperInMemory: o.upperInMemory,
    ...(o.cpus ? { cpus: o.cpus } : {}),
  });
  await writeFile(join(b.dir, 'config.json'), JSON.stringify(spec, null, 2));
}

/**
 * Runs `runsc run|restore … --detach` (with `args` up to the container id); its output and the
 * sandbox's go to the bundle's console.log. Resolves with the sandbox process's pid.
 * `mergePages`: see GvisorDriverOptions.
 */
export async function launch(
  host: GvisorHost,
  b: Bundle,
  args: readonly string[],
  what: string,
  mergePages: boolean,
): Promise<number> {
  const pidFile = join(b.dir, PID_FILE);
  const argv = [
    host.runscPath,
    ...runscGlobalArgs(b.flags),
    ...args,
    '--pid-file',
    pidFile,
    '--detach',
    b.id,
  ];
  const r = await runDetached(argv, {
    logPath: join(b.dir, CONSOLE_LOG),
    timeoutMs: LAUNCH_TIMEOUT_MS,
    reaperPath: host.reaperPath,
    hideNetSysctl: b.flags.network === 'sandbox' && host.netSysctlQuirk,
    mergePages,
  });
  const code = args[0] === 'restore' ? 'restore_failed' : 'start_failed';
  if (r.code !== 0) {
    const log = await consoleLog(b);
    const tail = log.trim().split('\n').slice(-5).join('\n');
    throw new SandboxStartError(code, `${describeFailure(what, r)}${tail ? `: ${tail}` : ''}`, log);
  }
  const pid = Number(await readFile(pidFile, 'utf8').catch(() => ''));
  if (!Number.isInteger(pid) || pid <= 0) throw new SandboxStartError(code, `${what} wrote no sandbox pid`);
  return pid;
}

/** What is kept of a console for an error's detail: its end, which says why it stopped. */
const CONSOLE_TAIL_BYTES = 64 * 1024;

/** The end of the sandbox's console output, or '' when there is none. */
export async function consoleLog(b: Pick<Bundle, 'dir'>): Promise<string> {
  const fh = await open(join(b.dir, CONSOLE_LOG), 'r').catch(() => null);
  if (!fh) return '';
  try {
    const { size } = await fh.stat();
    const length = Math.min(size, CONSOLE_TAIL_BYTES);
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(length), 0, length, size - length);
    return buffer.subarray(0, bytesRead).toString('utf8');
  } finally {
    await fh.close();
  }
}
