import { writeFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { loadAddon } from './native.js';

type Addon = { bindMountReadOnly(source: string, target: string): number };

export interface BootIdPaths {
  /** envd's own file, on the sandbox's /dev tmpfs (never part of a filesystem-only pause). */
  readonly source: string;
  /** The kernel's file that programs read. */
  readonly target: string;
}

const SANDBOX_PATHS: BootIdPaths = {
  source: '/dev/.aenv-boot-id',
  target: '/proc/sys/kernel/random/boot_id',
};

/**
 * The sandbox's boot id, as each machine that boots has its own. gVisor makes
 * /proc/sys/kernel/random/boot_id once per kernel and a capture carries it, so every sandbox
 * restored from one capture (a template's ready state, a fork's parent) would read the same one.
 * The node hands a fresh id at each /init of a sandbox that starts fresh (a create, a fork child,
 * a filesystem-only resume); a memory resume has no /init and keeps the id it had.
 *
 * The id is written to envd's own file, bind-mounted read-only over the kernel's once per kernel:
 * a capture carries the mount, so a later id only rewrites the file (the same inode).
 */
export class BootId {
  private mounted = false;

  constructor(
    private readonly logger: Logger,
    private readonly addon: Addon | null = loadAddon<Addon>('bind-mount'),
    private readonly paths: BootIdPaths = SANDBOX_PATHS,
  ) {}

  /** Makes `id` the boot id programs read; without the addon (tests, dist/) nothing changes. */
  set(id: string): void {
    if (!this.addon) return;
    writeFileSync(this.paths.source, `${id}\n`, { mode: 0o444 });
    if (this.mounted) return;
    const r = this.addon.bindMountReadOnly(this.paths.source, this.paths.target);
    if (r !== 0) {
      this.logger.warn({ errno: -r, target: this.paths.target }, 'boot id not mounted: the kernel one stays');
      return;
    }
    this.mounted = true;
  }
}
