/** Where one node of a cluster lives, and what tells its resources apart from other nodes' on this machine. */
export interface NodePlace {
  /** Its process's name, and its log file's (`logs/<name>.log`). */
  name: string;
  /** Its id at the scheduler. */
  id: string;
  /** host:port of its API. */
  addr: string;
  home: string;
  runtimeDir: string;
  /** Prefixes its network namespaces, iptables chains and cgroups. */
  tag: string;
  /** Its sandboxes' host-side addresses (a CIDR of its own). */
  hostRange: string;
}

/**
 * A cluster's place on this machine: every port, directory, tag, address range and setting its
 * parts are started with. `npm run cluster` and the tests' TestCluster each have one.
 */
export interface ClusterLayout {
  /** Its state: logs/, redis/ (the append-only file), snapshot-store/ (the shared repository). */
  home: string;
  /** Where nodes' homes find the shared base template and image layers (layers/, templates/). */
  sharedCache: string;
  /** The key every part checks and presents. */
  apiKey: string;
  /** redis-server's port on 127.0.0.1. */
  redisPort: number;
  /** host:port of scheduler replica k (from 0). */
  schedulerAddr(k: number): string;
  /** host:port of gateway replica k (from 0). */
  gatewayAddr(k: number): string;
  /** Node k (from 0). */
  node(k: number): NodePlace;
  /** Sandboxes are served at `{port}-{id}.{domain}` on nodes and gateways, when set. */
  sandboxDomain?: string;
  /** Every part's AENV_LOG_LEVEL (their own default when unset). */
  logLevel?: string;
  /** Each node's warm pool of the base template. */
  poolSize: number;
  maxSandboxesPerNode?: number;
  /** The schedulers' CPU overcommit, when nodes report one machine's CPUs as each their own. */
  cpuOvercommit?: number;
}

/** A layout's log directory. */
export const logDir = (layout: ClusterLayout): string => `${layout.home}/logs`;

/** A layout's shared snapshot repository (posix_fs). */
export const snapshotStore = (layout: ClusterLayout): string => `${layout.home}/snapshot-store`;
