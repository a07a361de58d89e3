import { mkdirSync, readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import path from 'node:path';
import { LifecycleActivity } from '@agentenv/dashboard';
import { createSchedulerClient } from '@agentenv/scheduler';
import { pino } from 'pino';
import { buildApp } from './api/index.js';
import { clusterAgent, SandboxEventLog } from './cluster/index.js';
import { ConfigError, loadConfig, parseListenAddress } from './config/index.js';
import { defaultToolsDir, EnvdClient, envdVersion } from './envd/index.js';
import { ImageStore } from './image/index.js';
import { MetricsHistory, MetricsSampler, NodeMetrics } from './metrics/index.js';
import { NetworkManager } from './network/index.js';
import { startChunkExchange } from './p2p/index.js';
import {
  LocalCaptureDirs,
  observeAll,
  Orchestrator,
  procMeminfo,
  RepositoryPauses,
  SandboxStore,
  SandboxWarmPool,
} from './orchestrator/index.js';
import { SandboxProxy } from './proxy/index.js';
import { loadOrCreateSecret, newApiKey, newNodeSecret } from './security/index.js';
import { BaseTemplate, ColdImages, createSourceChain, RepositorySnapshotCatalog } from './sources/index.js';
import { BuildFiles, BuildRunner, BuiltTemplates, ImageBoot } from './templates/index.js';
import { launchProcessesWith, Limiter, ProcessSpawner } from './util/index.js';
import { VolumeStore } from './volumes/index.js';
import { createDriver, openSnapshotRepository } from './wiring/index.js';

const version = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/**
 * What startup has set up on the host, undone in reverse when a later step fails (the port is
 * taken, the repository is unreachable, …) so a failed start leaves no namespaces or sandboxes.
 */
const undoStartup: (() => unknown)[] = [];
/** Sandbox usage for the metrics endpoints: a sample every 5 s, the last hour kept per sandbox. */
const USAGE_SAMPLE_INTERVAL_MS = 5_000;
const USAGE_HISTORY_SAMPLES = 720;

/**
 * SIGTERM/SIGINT are caught from the first line: one that arrives while the node is still starting
 * (its chains and namespaces already exist) stops it once startup is done, instead of killing the
 * process with everything left on the host.
 */
const signals: { received?: string; stop?: (signal: string) => Promise<void> } = {};
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    signals.received ??= signal;
    void signals.stop?.(signal);
  });
}

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({ name: 'aenv-server', level: process.env.AENV_LOG_LEVEL ?? 'info' });
  const { host, port } = parseListenAddress(config.apiAddr);
  const home = config.homePath;
  mkdirSync(home, { recursive: true });

  // The programs the node runs (ip, iptables, runsc, …) start from a small helper: see ProcessSpawner.
  const spawner = new ProcessSpawner();
  launchProcessesWith(spawner);
  undoStartup.push(() => spawner.close());

  const apiKey = config.apiKey ?? loadOrCreateSecret(path.join(home, 'secrets', 'api-key'), newApiKey);
  const nodeSecret = loadOrCreateSecret(path.join(home, 'secrets', 'node-secret'), newNodeSecret);

  const driver = createDriver(config.runtime, {
    runtimePath: config.runtimePath,
    nodeTag: config.network.nodeTag,
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
  const base = new BaseTemplate({ home, driver, network, toolsDir, logger });

  const { store: snapshotStore, cache: snapshotCache } = await openSnapshotRepository(config);
  const snapshots = new RepositorySnapshotCatalog(snapshotStore, snapshotCache);

  // What creates start from: snapshots, then built templates, then `base`; images; forks.
  const images = new ImageBoot({ images: new ImageStore({ home }), toolsDir });
  const envdVer = await envdVersion(toolsDir);
  const envd = (host: string, port: number) => new EnvdClient(host, port);
  const buildFiles = new BuildFiles(path.join(home, 'build-files'));
  const built = new BuiltTemplates({
    store: snapshotStore,
    cache: snapshotCache,
    runner: new BuildRunner({
      driver,
      network,
      images,
      // The chain is made below from `built` itself: a build may start from a built template.
      sources: { resolve: (s) => sources.resolve(s) },
      envd,
      files: buildFiles,
      workDir: path.join(home, 'builds'),
    }),
    queue: new Limiter(2),
    envdVersion: envdVer,
    builtin: base,
    logger,
  });
  const sources = createSourceChain({
    snapshots,
    templates: [built, base],
    cold: new ColdImages({ images, envdVersion: envdVer }),
  });
  const captures = new LocalCaptureDirs(path.join(home, 'captures'));
  const pool = new SandboxWarmPool({
    size: config.pool.size,
    driver,
    slots: network,
    memory: procMeminfo,
    captures,
    logger,
  });
  const metrics = new NodeMetrics({
    sandboxCounts: () => orchestrator.counts(),
    poolSizes: () => ({ network: network.stats().pooled, ...pool.sizes() }),
    memory: () => orchestrator.memoryFigures(),
  });
  const schedulerUrl = config.cluster.schedulerUrl;
  const chunks = await startChunkExchange({
    config,
    apiKey,
    ...(schedulerUrl && {
      scheduler: {
        lookup: createSchedulerClient({ url: schedulerUrl, apiKey }),
        nodeId: config.nodeIdentity.nodeId,
      },
    }),
    store: snapshotStore,
    cache: snapshotCache,
    registry: metrics.registry,
    logger,
  });
  undoStartup.push(() => chunks.close());
  const events = new SandboxEventLog(config.nodeIdentity.nodeId);
  const activity = new LifecycleActivity(config.nodeIdentity.nodeId);
  const orchestrator: Orchestrator = new Orchestrator({
    config,
    store,
    driver,
    sources,
    snapshots,
    pauses: new RepositoryPauses(snapshotStore, snapshotCache, nodeSecret),
    slots: network,
    envd,
    logger,
    nodeSecret,
    captures,
    observer: observeAll(metrics, events.observer, {
      stage: (name, ms) => activity.stage(name, ms),
      failed: (name) => activity.failed(name),
      // The dashboard reads lifecycle events from the node's event log.
      event: () => {},
    }),
    pool,
    memory: { host: procMeminfo, totalBytes: totalmem() },
  });
  const usageHistory = new MetricsHistory(USAGE_HISTORY_SAMPLES);
  const usageSampler = new MetricsSampler({
    source: {
      known: () =>
        orchestrator.list().map((r) => ({ sandboxId: r.sandboxId, running: r.state === 'running' })),
      sample: (id) => orchestrator.usage(id),
    },
    history: usageHistory,
    intervalMs: USAGE_SAMPLE_INTERVAL_MS,
    logger,
  });
  const proxy = new SandboxProxy(orchestrator, logger);
  orchestrator.beforeCapture((id) => proxy.drain(id));
  const agent = config.cluster.schedulerUrl
    ? clusterAgent({
        schedulerUrl: config.cluster.schedulerUrl,
        apiKey,
        nodeId: config.nodeIdentity.nodeId,
        clusterId: config.nodeIdentity.clusterId,
        advertiseUrl: config.cluster.advertiseUrl ?? `http://${config.apiAddr}`,
        version,
        limits: config.orchestrator,
        records: () => orchestrator.list(),
        cache: snapshotCache,
        repository: snapshotStore,
        events,
        logger,
        p2p: chunks.advertisement,
      })
    : undefined;
  const recovered = orchestrator.recover();
  if (recovered.paused || recovered.lost.length) logger.info(recovered, 'recovered sandbox records');

  const app = await buildApp({
    config,
    apiKey,
    orchestrator,
    snapshots,
    templates: { built, files: buildFiles },
    proxy,
    metrics,
    events,
    usage: { history: usageHistory, sampleNow: (id) => usageSampler.sampleOne(id) },
    logger,
    version,
    volumes: new VolumeStore(config.volumes.path),
    dashboard: { activity, store: snapshotStore, cache: snapshotCache },
  });
  await app.listen({ host, port });
  usageSampler.start();
  undoStartup.length = 0;
  orchestrator.startTtlLoop();
  orchestrator.startMemoryWatch();
  orchestrator.startIdleLoop();
  // The node joins the cluster once `base` exists, so the scheduler places nothing here while the
  // first start builds it (minutes); a failed build still joins, and creates retry it.
  void base
    .prepare()
    .catch((err) => logger.error({ err }, 'building the base template failed; creates will retry'))
    .finally(() => {
      if (!signals.received) agent?.start();
    });

  const url = `${config.tlsCert ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  process.stdout.write(
    [
      `AgentENV node ${version} listening on ${url} (home ${home})`,
      `API key: ${apiKey}`,
      'Point the E2B SDK at it with:',
      `export E2B_API_URL=${url} E2B_SANDBOX_URL=${url} E2B_VOLUME_API_URL=${url} E2B_API_KEY=${apiKey}`,
      '',
    ].join('\n'),
  );

  let stopping = false;
  signals.stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: pausing running sandboxes');
    // Drained first, so the cluster stops placing here while the sandboxes are paused. Every step
    // runs even when one before it failed: the host's rules and namespaces go last.
    let failed = false;
    for (const step of [
      () => agent?.drain(),
      () => usageSampler.stop(),
      () => orchestrator.shutdown(),
      () => agent?.stop(),
      () => base.close(),
      () => app.close(),
      () => chunks.close(),
      () => proxy.close(),
      () => driver.close(),
      () => network.shutdown(),
      () => store.close(),
      () => spawner.close(),
    ]) {
      await (async () => step())().catch((err: unknown) => {
        failed = true;
        logger.error({ err }, 'shutdown step failed');
      });
    }
    process.exit(failed ? 1 : 0);
  };
  if (signals.received) void signals.stop(signals.received);
}

main().catch(async (err: unknown) => {
  const msg = err instanceof ConfigError ? err.message : ((err as Error).stack ?? String(err));
  process.stderr.write(`aenv-server: ${msg}\n`);
  for (const undo of undoStartup.reverse()) await (async () => undo())().catch(() => undefined);
  process.exit(1);
});
