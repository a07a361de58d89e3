import {
  launchNode,
  type ClusterLayout,
  type HealthCheck,
  type NodePlace,
  type Proc,
} from '../launcher/index.js';

/** The test cluster's own state (ports 199xx, network tags h9…, hosts 10.119.0.0/16). */
export const TEST_CLUSTER_HOME = '/var/lib/aenv-h9';
const RUNTIME = '/run/aenv-h9';
/** The machine's cached base template and image layers, shared with the node tests. */
const SHARED_CACHE = process.env.AENV_TEST_HOME ?? '/var/lib/aenv-test';
export const TEST_CLUSTER_KEY = 'e2b_' + '9a'.repeat(16);
export const TEST_CLUSTER_DOMAIN = 'aenv.test';

/**
 * A test node's place: `name` is [a-z0-9], at most 4 characters, its network tag `h9` + name;
 * `hostRange` a part of 10.119.0.0/16.
 */
export function testNodePlace(name: string, addr: string, hostRange: string): NodePlace {
  return {
    name: `node-${name}`,
    id: `h9${name}`,
    addr,
    home: `${TEST_CLUSTER_HOME}/${name}`,
    runtimeDir: RUNTIME,
    tag: `h9${name}`,
    hostRange,
  };
}

/** Replica k's address from a list of ports: the test cluster has room for as many replicas. */
const replicas = (ports: number[]) => (k: number) => {
  if (k >= ports.length) throw new Error(`replicas must be 1 to ${ports.length}`);
  return `127.0.0.1:${ports[k]}`;
};

/** Where TestCluster runs its parts: the suites depend on these ports, paths, tags and ranges. */
export const TEST_CLUSTER_LAYOUT: ClusterLayout = {
  home: TEST_CLUSTER_HOME,
  sharedCache: SHARED_CACHE,
  apiKey: TEST_CLUSTER_KEY,
  redisPort: 19902,
  gatewayAddr: replicas([19900, 19903]),
  schedulerAddr: replicas([19901, 19905]),
  node: (k) => testNodePlace(`n${k}`, `127.0.0.1:${19910 + k}`, `10.119.${k * 32}.0/19`),
  sandboxDomain: TEST_CLUSTER_DOMAIN,
  logLevel: process.env.AENV_TEST_LOG_LEVEL ?? 'warn',
  poolSize: 0,
  // Every node reports this whole 2-core machine as its own: allow the suites' 20 per node.
  cpuOvercommit: 64,
};

export interface NodeSpec {
  /** [a-z0-9], at most 4 characters: the network tag is `h9` + name. */
  name: string;
  addr: string;
  /** The node's own host range, a part of 10.119.0.0/16. */
  hostRange: string;
  env?: Record<string, string>;
  health?: HealthCheck;
}

/** A node of the test cluster's layout on its own (no scheduler). */
export const startNode = (spec: NodeSpec): Promise<Proc> =>
  launchNode(TEST_CLUSTER_LAYOUT, testNodePlace(spec.name, spec.addr, spec.hostRange), spec);
