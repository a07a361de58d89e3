import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { LifecycleActivity } from '@agentenv/dashboard';
import { pino } from 'pino';
import { buildApp } from './api/app.js';
import { ConfigError, loadConfig, parseListenAddress } from './config/load.js';
import { NodeMetrics } from './metrics/node-metrics.js';
import { NetworkManager } from './network/manager.js';
import { EnvdClient } from './orchestrator/envd-client.js';
import { Orchestrator } from './orchestrator/orchestrator.js';
import { loadOrCreateSecret, newApiKey } from './orchestrator/tokens.js';
import { SandboxProxy } from './proxy/proxy.js';
import { SandboxWarmPool } from './orchestrator/warm-pool.js';
import { GvisorDriver } from './runtime/gvisor/driver.js';
import { SandboxStore } from './store/sandbox-store.js';
import { ImageStore } from './image/oci/index.js';
import { BuiltTemplates } from './templates/built.js';
import { BuildFiles } from './templates/builds/files.js';
import { BuildQueue } from './templates/builds/queue.js';
import { BuildRunner } from './templates/builds/runner.js';
import { BuiltinTemplates, defaultToolsDir, envdVersion } from './templates/catalog.js';
import { ColdImages } from './templates/cold.js';
import { ImageBoot } from './templates/image-boot.js';
import { RepositoryPauses } from './templates/repository-pauses.js';
import { RepositorySnapshotCatalog } from './templates/repository-snapshots.js';
import { openSnapshotRepository } from './templates/snapshot-repository.js';
import { TemplateResolver } from './templates/resolver.js';

const version = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/**
 * What startup has set up on the host, undone in reverse when a later step fails (the port is
 * taken, the repository is unreachable, …) so a failed start leaves no namespaces or sandboxes.
 */
const undoStartup: (() => unknown)[] = [];

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({ name: 'aenv-server', level: process.env.AENV_LOG_LEVEL ?? 'info' });
  const { host, port } = parseListenAddress(config.apiAddr);
  const home = config.homePath;
  mkdirSync(home, { recursive: true });

  const apiKey = config.apiKey ?? loadOrCreateSecret(path.join(home, 'secrets', 'api-key'), newApiKey);
  const nodeSecret = loadOrCreateSecret(path.join(home, 'secrets', 'node-secret'), () =>
    randomBytes(32).toString('hex'),
  );

  // Per-node runtime dir and cgroup parent: two nodes on one machine never touch each other's.
  // Connections are drained before every capture; TIME_WAIT leftovers must not fail it.
  const driver = new GvisorDriver({
    runtimeDir: path.join(config.runtimePath, config.network.nodeTag),
    cgroupParent: `aenv-${config.network.nodeTag}`,
    netDisconnectOk: true,
  });
  const probe = await driver.probe();
  if (!probe.available) throw new ConfigError(`runtime ${driver.name} is not usable: ${probe.reason}`);
  // Sandboxes a crashed predecessor left running are released before anything new starts.
  await driver.prepare();
  undoStartup.push(() => driver.close());
  const network = await NetworkManager.create({
    nodeTag: config.network.nodeTag,
    hostRange: config.network.hostRange,
    alwaysDenied: config.network.alwaysDeniedCidrs,
    // Spare slots beyond the warm sandboxes' own, so resumes and cold creates rarely wait.
    poolSize: config.pool.size + 2,
    logger,
  });
  undoStartup.push(() => network.shutdown());
  const store = new SandboxStore(path.join(home, 'state', 'sandboxes.db'));
  undoStartup.push(() => store.close());
  const toolsDir = process.env.AENV_TOOLS_DIR ?? defaultToolsDir();
  const templates = new BuiltinTemplates({ home, driver, network, toolsDir, logger });

  const { store: snapshotStore, cache: snapshotCache } = await openSnapshotRepository(config);
  const snapshots = new RepositorySnapshotCatalog(snapshotStore, snapshotCache);

  // Templates from images and builds: built ones resolve first, `base` after them.
  const images = new ImageBoot({ images: new ImageStore({ home }), toolsDir });
  const envdVer = await envdVersion(toolsDir);
  const envd = new EnvdClient();
  const buildFiles = new BuildFiles(path.join(home, 'build-files'));
  const built: BuiltTemplates = new BuiltTemplates({
    store: snapshotStore,
    cache: snapshotCache,
    runner: new BuildRunner({
      driver,
      network,
      images,
      templates: { resolve: (id) => built.resolve(id) },
      envd,
      files: buildFiles,
      workDir: path.join(home, 'builds'),
    }),
    queue: new BuildQueue(2),
    envdVersion: envdVer,
    next: templates,
    logger,
  });
  const cold = new ColdImages({ images, envdVersion: envdVer, next: built });
  const pool = new SandboxWarmPool({ size: config.pool.size, driver, slots: network, logger });
  const metrics = new NodeMetrics({
    sandboxCounts: () => orchestrator.counts(),
    poolSizes: () => ({ network: network.stats().pooled, ...pool.sizes() }),
  });
  const activity = new LifecycleActivity(config.nodeIdentity.nodeId);
  const orchestrator: Orchestrator = new Orchestrator({
    config,
    store,
    driver,
    templates: new TemplateResolver(snapshots, cold),
    snapshots,
    pauses: new RepositoryPauses(snapshotStore, snapshotCache, nodeSecret),
    slots: network,
    envd,
    logger,
    nodeSecret,
    capturesDir: path.join(home, 'captures'),
    observer: {
      stage: (name, ms) => (metrics.stage(name, ms), activity.stage(name, ms)),
      failed: (name) => (metrics.failed(name), activity.failed(name)),
    },
    pool,
  });
  const proxy = new SandboxProxy(orchestrator, logger);
  orchestrator.beforeCapture((id) => proxy.drain(id));
  const recovered = orchestrator.recover();
  if (recovered.paused || recovered.lost.length) logger.info(recovered, 'recovered sandbox records');

  const app = await buildApp({
    config,
    apiKey,
    orchestrator,
    snapshots,
    templates: { built, files: buildFiles, cold },
    proxy,
    metrics,
    logger,
    version,
    dashboard: { activity, store: snapshotStore, cache: snapshotCache },
  });
  await app.listen({ host, port });
  undoStartup.length = 0;
  orchestrator.startTtlLoop();
  void templates
    .prepare()
    .catch((err) => logger.error({ err }, 'building the base template failed; creates will retry'));

  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  process.stdout.write(
    [
      `AgentENV node ${version} listening on ${url} (home ${home})`,
      `API key: ${apiKey}`,
      'Point the E2B SDK at it with:',
      `export E2B_API_URL=${url} E2B_SANDBOX_URL=${url} E2B_API_KEY=${apiKey}`,
      '',
    ].join('\n'),
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: pausing running sandboxes');
    await orchestrator.shutdown();
    await templates.close();
    await app.close();
    proxy.close();
    await driver.close();
    await network.shutdown();
    store.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

main().catch(async (err: unknown) => {
  const msg = err instanceof ConfigError ? err.message : ((err as Error).stack ?? String(err));
  process.stderr.write(`aenv-server: ${msg}\n`);
  for (const undo of undoStartup.reverse()) await (async () => undo())().catch(() => undefined);
  process.exit(1);
});
