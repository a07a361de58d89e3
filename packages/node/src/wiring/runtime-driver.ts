import path from 'node:path';
import { ConfigError, type NodeConfig } from '../config/index.js';
import { GvisorDriver, type RuntimeDriver } from '../runtime/index.js';

/** Where the node keeps its runtime state, apart from other nodes on the machine. */
export interface DriverPlacement {
  /** The node's runtime directory (`runtime_path`). */
  runtimePath: string;
  /** The node's tag: its runtime state and cgroups are under it. */
  nodeTag: string;
}

/**
 * The runtime driver `[runtime] driver` names. `firecracker` is refused until a driver exists
 * (these machines have PVM-only KVM and no Firecracker binary; see RUNTIME.md).
 */
export function createDriver(runtime: NodeConfig['runtime'], at: DriverPlacement): RuntimeDriver {
  switch (runtime.driver) {
    case 'gvisor':
      // Per-node runtime dir and cgroup parent: two nodes on one machine never touch each other's.
      // Connections are drained before every capture; TIME_WAIT leftovers must not fail it.
      return new GvisorDriver({
        runtimeDir: path.join(at.runtimePath, at.nodeTag),
        cgroupParent: `aenv-${at.nodeTag}`,
        netDisconnectOk: true,
        mergePages: runtime.mergePages,
      });
    case 'firecracker':
      throw new ConfigError(
        'runtime.driver "firecracker" is not available: this build has no Firecracker driver yet; ' +
          'use "gvisor" (the default)',
      );
  }
}
