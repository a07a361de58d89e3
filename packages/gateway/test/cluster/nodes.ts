import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startHealthy, type Proc } from './processes.js';

export const NODE_BIN = fileURLToPath(new URL('../../../node/bin/aenv-server.js', import.meta.url));
/** The machine's cached base template and image layers, shared with the node tests. */
export const SHARED_CACHE = process.env.AENV_TEST_HOME ?? '/var/lib/aenv-test';
/** This suite's own state (ports 199xx, network tags h9…, hosts 10.119.0.0/16). */
export const HOME = '/var/lib/aenv-h9';
export const RUNTIME = '/run/aenv-h9';
export const API_KEY = 'e2b_' + '9a'.repeat(16);
export const DOMAIN = 'aenv.test';

/** A node home that borrows the cached base template instead of building it again. */
export function nodeHome(name: string, fresh = false): string {
  const home = `${HOME}/${name}`;
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
    AENV_API_KEY: API_KEY,
    AENV_NETWORK_NODE_TAG: `h9${spec.name}`,
    AENV_NETWORK_HOST_RANGE: spec.hostRange,
    AENV_SANDBOX_PROXY_DOMAINS: DOMAIN,
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
