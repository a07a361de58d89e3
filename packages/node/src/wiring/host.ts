import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { BannerKey } from '@agentenv/common';
import type { Logger } from 'pino';
import { ConfigError, type NodeConfig } from '../config/index.js';
import { NetworkManager } from '../network/index.js';
import { SandboxStore } from '../orchestrator/index.js';
import type { RuntimeDriver } from '../runtime/index.js';
import { loadOrCreateSecret, newNodeSecret, nodeApiKey } from '../security/index.js';
import { launchProcessesWith, ProcessSpawner } from '../util/index.js';
import { createDriver } from './runtime-driver.js';

/** What the node holds on its host: programs, secrets, the runtime, the network and its records. */
export interface NodeHost {
  spawner: ProcessSpawner;
  apiKey: string;
  /** What the startup banner shows for the API key. */
  apiKeyBanner: BannerKey;
  nodeSecret: string;
  driver: RuntimeDriver;
  network: NetworkManager;
  store: SandboxStore;
}

/**
 * Sets the host up for the node, in the order later steps need it. What is set up is pushed onto
 * `undo`, so a start that fails further on can take it down again in reverse.
 */
export async function prepareHost(
  config: NodeConfig,
  logger: Logger,
  undo: (() => unknown)[],
): Promise<NodeHost> {
  const home = config.homePath;
  mkdirSync(home, { recursive: true });

  // The programs the node runs (ip, iptables, runsc, …) start from a small helper: see ProcessSpawner.
  const spawner = new ProcessSpawner();
  launchProcessesWith(spawner);
  undo.push(() => spawner.close());

  const apiKey = nodeApiKey(config.apiKey, home);
  const nodeSecret = loadOrCreateSecret(path.join(home, 'secrets', 'node-secret'), newNodeSecret);

  const driver = createDriver(config.runtime, {
    runtimePath: config.runtimePath,
    nodeTag: config.network.nodeTag,
  });
  const probe = await driver.probe();
  if (!probe.available) throw new ConfigError(`runtime ${driver.name} is not usable: ${probe.reason}`);
  // Sandboxes a crashed predecessor left running are released before anything new starts.
  await driver.prepare();
  undo.push(() => driver.close());
  const network = await NetworkManager.create({
    nodeTag: config.network.nodeTag,
    hostRange: config.network.hostRange,
    alwaysDenied: config.network.alwaysDeniedCidrs,
    // Spare slots beyond the warm sandboxes' own, so resumes and cold creates rarely wait.
    poolSize: config.pool.size + 2,
    logger,
  });
  undo.push(() => network.shutdown());
  const store = new SandboxStore(path.join(home, 'state', 'sandboxes.db'));
  undo.push(() => store.close());
  return { spawner, apiKey: apiKey.value, apiKeyBanner: apiKey.banner, nodeSecret, driver, network, store };
}
