import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ReleasingSandbox, Resources } from '../driver.js';
import type { Bundle } from './bundle.js';
import { removeCgroups } from './cgroups.js';
import type { GvisorHost } from './host.js';
import type { DriverLayout } from './layout.js';
import { unmountIfMounted } from './mounts.js';
import { unbindVolumes } from './volumes.js';
import { stopProcesses } from './processes.js';
import { runCommand, runscGlobalArgs } from './runsc.js';

const CMD_TIMEOUT_MS = 60_000;

/** What releasing a sandbox needs to know; null fields are derived from its id. */
export type ReleaseTarget = Pick<Bundle, 'dir' | 'cgroupsPath' | 'flags'>;

/**
 * Releases sandboxes: stops their processes at once, then reclaims runsc's state, cgroups, mounts
 * and the bundle, either before returning or in the background. Every step is idempotent and
 * keyed by the sandbox id alone, so whatever a crash interrupts, the next start's orphan sweep
 * (which releases every id it finds in runsc's root or the bundle directory) finishes it.
 */
export class Reclaimer {
  private readonly pending = new Map<string, { info: ReleasingSandbox; done: Promise<void> }>();

  constructor(
    private readonly layout: DriverLayout,
    private readonly host: () => GvisorHost | null,
  ) {}

  /** Sandboxes whose processes are stopped but whose resources are still being reclaimed. */
  releasing(): ReleasingSandbox[] {
    return [...this.pending.values()].map((p) => p.info);
  }

  /** Resolves once nothing of `id` is left on the host (at once when it is not being released). */
  released(id: string): Promise<void> {
    return this.pending.get(id)?.done ?? Promise.resolve();
  }

  /** Waits for every background release. */
  async drain(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending.values()].map((p) => p.done));
  }

  /**
   * Stops the sandbox's processes now, then reclaims the rest in the background; `released(id)`
   * tells when that is done. Resolves once no process of it runs, or at once when `exiting` (a
   * checkpoint stopped the sandbox: its processes only exit, and waiting for that is the
   * background's).
   */
  async stopThenReclaim(
    id: string,
    target: ReleaseTarget | null,
    pid: number | null,
    resources: Resources | null,
    exiting = false,
  ): Promise<void> {
    if (this.pending.has(id)) return;
    const stop = () => this.stop(target?.cgroupsPath ?? this.layout.cgroupsPath(id), pid);
    if (!exiting) await stop();
    const info: ReleasingSandbox = { id, resources, since: Date.now() };
    const done = (exiting ? stop() : Promise.resolve())
      .then(() => this.release(id, target))
      .catch(() => undefined)
      .finally(() => this.pending.delete(id));
    this.pending.set(id, { info, done });
  }

  private async stop(cgroupsPath: string, pid: number | null): Promise<void> {
    const host = this.host();
    if (host) await stopProcesses(host.cgroups, cgroupsPath, pid);
  }

  /**
   * Releases everything a sandbox id may hold, whatever state it got to: runsc's container and
   * state files, its processes (delete --force kills them), cgroups, mounts and the bundle.
   */
  async release(id: string, target: ReleaseTarget | null): Promise<void> {
    const flags = target?.flags ?? this.layout.rootFlags();
    const host = this.host();
    const runsc = host?.runscPath ?? 'runsc';
    const cgroupsPath = target?.cgroupsPath ?? this.layout.cgroupsPath(id);
    // Killed here rather than by `runsc delete`, which then finds nothing to wait for.
    await this.stop(cgroupsPath, null);
    await runCommand([runsc, ...runscGlobalArgs(flags), 'delete', '--force', id], {
      timeoutMs: CMD_TIMEOUT_MS,
    }).catch(() => null);
    await Promise.all(this.layout.runscFiles(id).map((f) => rm(f, { force: true }).catch(() => null)));
    const bundle = target?.dir ?? this.layout.bundleDir(id);
    if (host) {
      // Killed processes may take a moment to leave the cgroup; only an empty one can be removed.
      for (let i = 0; i < 100 && (await removeCgroups(host.cgroups, cgroupsPath)).length > 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    await unmountIfMounted(join(bundle, 'upper')).catch(() => null);
    await unmountIfMounted(join(bundle, 'rootfs')).catch(() => null);
    // Never recursing into a volume: a bundle whose volumes stay bound is left for the next sweep.
    const unbound = await unbindVolumes(bundle).then(
      () => true,
      () => false,
    );
    if (unbound) await rm(bundle, { recursive: true, force: true }).catch(() => null);
  }
}
