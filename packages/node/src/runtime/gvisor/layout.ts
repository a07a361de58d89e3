import { join } from 'node:path';
import type { RunscFlags } from './runsc.js';

/** The container a file in runsc's root belongs to (one of DriverLayout.runscFiles), if any. */
export function containerOfRunscFile(name: string): string | undefined {
  return /^runsc-(.+)\.sock$/.exec(name)?.[1] ?? /^(.+)_sandbox:\1\.(?:lock|state)$/.exec(name)?.[1];
}

/**
 * Where one driver keeps its state on the host: runsc's --root, one bundle directory per sandbox,
 * and one cgroup per sandbox under a parent of its own (so two nodes on one machine, or a node
 * and its tests, never touch each other's sandboxes).
 */
export class DriverLayout {
  constructor(
    readonly runtimeDir: string,
    /** cgroup directory under each controller that holds one child per sandbox. */
    readonly cgroupParent: string,
  ) {}

  get runscRoot(): string {
    return join(this.runtimeDir, 'runsc');
  }

  get sandboxesDir(): string {
    return join(this.runtimeDir, 'sandboxes');
  }

  bundleDir(id: string): string {
    return join(this.sandboxesDir, id);
  }

  /** Flags for runsc commands that name a container only by id (list, delete of a leftover). */
  rootFlags(): RunscFlags {
    return { root: this.runscRoot, overlay: 'root:memory', network: 'none', netDisconnectOk: false };
  }

  /**
   * runsc's own files for a container under its root. `runsc delete` removes them only for a
   * container whose state it wrote, so a start killed before that leaves them behind.
   */
  runscFiles(id: string): string[] {
    return [`${id}_sandbox:${id}.lock`, `${id}_sandbox:${id}.state`, `runsc-${id}.sock`].map((f) =>
      join(this.runscRoot, f),
    );
  }

  /** The sandbox's cgroup path relative to each controller's mount, as runsc creates it. */
  cgroupsPath(id: string): string {
    return `/${this.cgroupParent}/${id}`;
  }
}
