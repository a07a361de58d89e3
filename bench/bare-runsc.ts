/**
 * Bare runsc for the benchmarks' baselines: the same flags, bundle (OCI spec) and readiness check
 * as the gVisor driver, without any of the node's machinery around it. Used by bench/runtime.ts
 * and bench/snapshot.ts.
 */
import { mkdir, readdir, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type GvisorHost,
  buildOciSpec,
  volumesDir,
  volumesMount,
  runscCommand as runCommand,
  runscGlobalArgs,
  runDetached,
  waitForHealth,
  type InitProcess,
  type ReadOnlyMount,
  type Resources,
} from '@agentenv/node';
import { readCapture } from '@agentenv/snapshot';
import { ENVD_PORT } from '@agentenv/protocol';
import type { TestNet } from '@agentenv/test-support/runtime';

/** What a bare sandbox boots or restores: one root filesystem layer, like the template's. */
export interface BareSource {
  readonly rootfs: string;
  readonly init: InitProcess;
  readonly mounts: readonly ReadOnlyMount[];
  readonly hostname?: string;
}

export interface BareRunsc {
  /** A bundle directory with config.json for a new container id. */
  bundle(net: TestNet, source: BareSource, resources: Resources): Promise<{ id: string; dir: string }>;
  /** `runsc run|restore … --detach` (its output and the sandbox's go to /dev/null). */
  launch(args: string[]): Promise<void>;
  /** Any other runsc command; throws with its stderr when it fails. */
  run(args: string[]): Promise<string>;
  /** `runsc delete --force`: stops the container and forgets it. */
  kill(id: string): Promise<void>;
  /** Waits until envd in the sandbox behind `net` answers /health. */
  healthy(net: TestNet): Promise<void>;
  /** `runsc delete --force` of every container made here, then its bundles and cgroups. */
  cleanup(): Promise<void>;
}

const CGROUP_CONTROLLERS = [
  'cpu',
  'cpuacct',
  'cpuset',
  'memory',
  'pids',
  'devices',
  'freezer',
  'blkio',
  'systemd',
];

/**
 * `underReaper`: launches go through aenv-reaper like the driver's (the sandbox is then reaped as
 * soon as it exits instead of whenever PID 1 gets to it); needs host.reaperPath.
 */
export function bareRunsc(
  host: GvisorHost,
  opts: { dir: string; cgroupParent: string; underReaper?: boolean },
): BareRunsc {
  const flags = {
    root: join(opts.dir, 'bare-runsc'),
    overlay: 'root:memory',
    network: 'sandbox' as const,
    netDisconnectOk: false,
  };
  const argv = (args: string[]) => [host.runscPath, ...runscGlobalArgs(flags), ...args];
  const ids = new Set<string>();
  let seq = 0;
  const run = async (args: string[]) => {
    const r = await runCommand(argv(args), { timeoutMs: 60_000 });
    if (r.code !== 0) throw new Error(`bare ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  return {
    async bundle(net, source, resources) {
      const id = `bare-${String(seq++).padStart(6, '0')}`;
      const dir = join(opts.dir, 'bare', id);
      // The node's captures carry the volumes' mount point: a restore of one needs it (empty here).
      await mkdir(volumesDir(dir), { recursive: true, mode: 0o700 });
      const spec = buildOciSpec({
        rootfs: source.rootfs,
        init: source.init,
        mounts: source.mounts,
        volumes: volumesMount(dir),
        resources,
        netnsPath: net.netnsPath,
        hostname: source.hostname ?? 'aenv',
        cgroupsPath: `/${opts.cgroupParent}/${id}`,
        upperInMemory: true,
      });
      await writeFile(join(dir, 'config.json'), JSON.stringify(spec));
      ids.add(id);
      return { id, dir };
    },
    async launch(args) {
      const reaperPath = opts.underReaper ? host.reaperPath : null;
      if (opts.underReaper && !reaperPath) throw new Error('aenv-reaper is not built');
      const r = await runDetached(argv(args), {
        logPath: '/dev/null',
        timeoutMs: 60_000,
        reaperPath,
        hideNetSysctl: host.netSysctlQuirk,
      });
      if (r.code !== 0) throw new Error(`bare ${args[0]} failed: ${r.stderr}`);
    },
    run,
    async kill(id) {
      await run(['delete', '--force', id]);
      ids.delete(id);
    },
    async healthy(net) {
      const e = await waitForHealth(net.hostAddress, ENVD_PORT, { timeoutMs: 30_000 });
      if (e) throw new Error(e);
    },
    async cleanup() {
      for (const id of ids) await run(['delete', '--force', id]).catch(() => undefined);
      ids.clear();
      await rm(join(opts.dir, 'bare'), { recursive: true, force: true });
      for (const c of CGROUP_CONTROLLERS)
        await rmdir(`/sys/fs/cgroup/${c}/${opts.cgroupParent}`).catch(() => undefined);
    },
  };
}

/** The newest ready-state capture of the base template in a node's home (what the node restores). */
export async function templateCapture(home: string): Promise<string> {
  const dir = join(home, 'templates');
  const dirs = (await readdir(dir)).filter((d) => !d.startsWith('.'));
  const dated = await Promise.all(dirs.map(async (d) => ({ d, t: (await stat(join(dir, d))).mtimeMs })));
  for (const { d } of dated.sort((a, b) => b.t - a.t)) {
    const c = join(dir, d, 'capture');
    if (
      await readCapture(c).then(
        () => true,
        () => false,
      )
    )
      return c;
  }
  throw new Error(`no base template capture in ${home}: start aenv-server once first`);
}
