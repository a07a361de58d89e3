import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { packageDir } from '../paths.js';
import { startHealthy, type Proc } from './processes.js';

export const NODE_BIN = path.join(packageDir('@agentenv/node'), 'bin', 'aenv-server.js');
/** The machine's cached base template and image layers, shared with the node tests. */
export const SHARED_CACHE = process.env.AENV_TEST_HOME ?? '/var/lib/aenv-test';
/** The test cluster's own state (ports 199xx, network tags h9…, hosts 10.119.0.0/16). */
export const TEST_CLUSTER_HOME = '/var/lib/aenv-h9';
const RUNTIME = '/run/aenv-h9';
export const TEST_CLUSTER_KEY = 'e2b_' + '9a'.repeat(16);
export const TEST_CLUSTER_DOMAIN = 'aenv.test';

/** A node home that borrows the cached base template instead of building it again. */
export function nodeHome(name: string, fresh = false): string {
  const home = `${TEST_CLUSTER_HOME}/${name}`;
  if (fresh) rmSync(home, { recursive: true, force: true });
  mkdirSync(home, { recursive: true });
  for (const shared of ['layers', 'templates']) {
    mkdirSync(`${SHARED_CACHE}/${shared}`, { recursive: true });
    if (!existsSync(`${home}/${shared}`)) symlinkSync(`${SHARED_CACHE}/${shared}`, `${home}/${shared}`);
  }
  return home;
}

export interface NodeSpec {
  /** [a-z0-9], at most 4 characters: the network tag is `h9` + name. */
  name: string;
  addr: string;
  /** The node's own host range, a part of 10.119.0.0/16. */
  hostRange: string;
  env?: Record<string, string>;
  health?: { url: string; ca?: string; servername?: string };
}

export function startNode(spec: NodeSpec): Promise<Proc> {
  const env = {
    API_ADDR: spec.addr,
    AENV_HOME_PATH: nodeHome(spec.name),
    AENV_RUNTIME_PATH: RUNTIME,
    AENV_API_KEY: TEST_CLUSTER_KEY,
    AENV_NETWORK_NODE_TAG: `h9${spec.name}`,
    AENV_NETWORK_HOST_RANGE: spec.hostRange,
    AENV_SANDBOX_PROXY_DOMAINS: TEST_CLUSTER_DOMAIN,
    AENV_POOL_SIZE: '0',
    AENV_LOG_LEVEL: process.env.AENV_TEST_LOG_LEVEL ?? 'warn',
    ...spec.env,
  };
  const health = spec.health ?? { url: `http://${spec.addr}/health` };
  return startHealthy(`node-${spec.name}`, process.execPath, [NODE_BIN], env, health.url, {
    ...health,
    timeoutMs: 120_000,
  });
}
