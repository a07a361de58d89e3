import { totalmem } from 'node:os';
import path from 'node:path';
import { LifecycleActivity } from '@agentenv/dashboard';
import { createSchedulerClient } from '@agentenv/scheduler';
import { installProcessPolicy, packageVersion, processLogger, type BannerKey } from '@agentenv/common';
import type { Logger } from 'pino';
import { buildApp } from './api/index.js';
import { clusterAgent, SandboxEventLog } from './cluster/index.js';
import { ConfigError, loadConfig, parseListenAddress, type NodeConfig } from './config/index.js';
import { MetricsHistory, MetricsSampler, NodeMetrics } from './metrics/index.js';
import {
  LocalCaptureDirs,
  observeAll,
  Orchestrator,
  procMeminfo,
  RepositoryPauses,
  SandboxWarmPool,
} from './orchestrator/index.js';
import { SandboxProxy } from './proxy/index.js';
import { probeListen } from './util/index.js';
import { VolumeMounts, VolumeStore } from './volumes/index.js';
import {
  openTemplates,
  prepareHost,
  startChunkExchange,
  type NodeHost,
  type NodeTemplates,
} from './wiring/index.js';

const version = packageVersion('@agentenv/node', import.meta.url);

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
const signals: { received?: string; stop?: (signal: string) => Promise<boolean> } = {};
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    signals.received ??= signal;
    void signals.stop?.(signal).then((ok) => process.exit(ok ? 0 : 1));
  });
}

/** Takes down what startup set up so far, in reverse. */
async function undoStart(): Promise<void> {
  for (const undo of undoStartup.reverse()) await (async () => undo())().catch(() => undefined);
  undoStartup.length = 0;
}

const logger = processLogger('aenv-server', process.env.AENV_LOG_LEVEL ?? 'info');
// Stopping pauses every running sandbox; systemd and Kubernetes give the node 15 minutes.
installProcessPolicy({
  logger,
  shutdown: (reason) => (signals.stop ? signals.stop(reason) : undoStart()),
  shutdownTimeoutMs: 10 * 60_000,
});

/** The orchestrator and what it reports through: metrics, the event log, the chunk exchange. */
async function assembleNode(
  config: NodeConfig,
  host: NodeHost,
  t: NodeTemplates,
  volumes: VolumeStore,
  logger: Logger,
) {
  const { driver, network } = host;
  const captures = new LocalCaptureDirs(path.join(config.homePath, 'captures'));
  const pool = new SandboxWarmPool({
    size: config.pool.size,
    driver,
    slots: network,
    memory: procMeminfo,
    captures,
    envd: t.envd,
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
    apiKey: host.apiKey,
    ...(schedulerUrl && {
      scheduler: {
        lookup: createSchedulerClient({ url: schedulerUrl, apiKey: host.apiKey }),
        nodeId: config.nodeIdentity.nodeId,
      },
    }),
    store: t.snapshotStore,
    cache: t.snapshotCache,
    registry: metrics.registry,
    logger,
  });
  undoStartup.push(() => chunks.close());
  const events = new SandboxEventLog(config.nodeIdentity.nodeId);
  const activity = new LifecycleActivity(config.nodeIdentity.nodeId);
  const orchestrator: Orchestrator = new Orchestrator({
    config,
    store: host.store,
    driver,
    sources: t.sources,
    snapshots: t.snapshots,
    pauses: new RepositoryPauses(t.snapshotStore, t.snapshotCache, host.nodeSecret),
    slots: network,
    envd: t.envd,
    logger,
    nodeSecret: host.nodeSecret,
    captures,
    observer: observeAll(metrics, events.observer, {
      stage: (name, ms) => activity.stage(name, ms),
      failed: (name) => activity.failed(name),
      // The dashboard reads lifecycle events from the node's event log.
      event: () => {},
    }),
    pool,
    volumes: new VolumeMounts(volumes),
    memory: { host: procMeminfo, totalBytes: totalmem() },
  });
  return { orchestrator, metrics, chunks, events, activity };
}

/** Samples every sandbox's usage for the metrics endpoints. */
function usageSampling(orchestrator: Orchestrator, logger: Logger) {
  const history = new MetricsHistory(USAGE_HISTORY_SAMPLES);
  const sampler = new MetricsSampler({
    source: {
      known: () =>
        orchestrator.list().map((r) => ({ sandboxId: r.sandboxId, running: r.state === 'running' })),
      sample: (id) => orchestrator.usage(id),
    },
    history,
    intervalMs: USAGE_SAMPLE_INTERVAL_MS,
    logger,
  });
  return { history, sampler };
}

/** The node's membership of a cluster, when a scheduler is configured. */
function clusterMembership(
  config: NodeConfig,
  host: NodeHost,
  t: NodeTemplates,
  node: Awaited<ReturnType<typeof assembleNode>>,
  logger: Logger,
) {
  const schedulerUrl = config.cluster.schedulerUrl;
  if (!schedulerUrl) return undefined;
  return clusterAgent({
    schedulerUrl,
    apiKey: host.apiKey,
    nodeId: config.nodeIdentity.nodeId,
    clusterId: config.nodeIdentity.clusterId,
    advertiseUrl: config.cluster.advertiseUrl ?? `http://${config.apiAddr}`,
    version,
    limits: config.orchestrator,
    records: () => node.orchestrator.list(),
    cache: t.snapshotCache,
    repository: t.snapshotStore,
    events: node.events,
    stages: (listener) => node.activity.subscribe((s) => s.ok && listener(s.stage)),
    fence: (id) => node.orchestrator.kill(id, 'fenced'),
    logger,
    p2p: node.chunks.advertisement,
  });
}

/**
 * How to reach the node, on stdout for whoever started it (and for journald and `kubectl logs`):
 * the key itself only when this start generated it.
 */
function announce(config: NodeConfig, key: BannerKey, { host, port }: { host: string; port: number }): void {
  const url = `${config.tlsCert ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  process.stdout.write(
    [
      `AgentENV node ${version} listening on ${url} (home ${config.homePath})`,
      `API key: ${key.text}`,
      'Point the E2B SDK at it with:',
      `export E2B_API_URL=${url} E2B_SANDBOX_URL=${url} E2B_VOLUME_API_URL=${url} E2B_API_KEY=${key.shell}`,
      '',
    ].join('\n'),
  );
}

/**
 * Stops the node: every step runs even when one before it failed, and the host's rules and
 * namespaces go last. Says whether all of them worked (the exit code after a signal); a second
 * call waits for the first.
 */
function stopWith(logger: Logger, steps: (() => unknown)[]): (reason: string) => Promise<boolean> {
  let stopping: Promise<boolean> | undefined;
  const stop = async (reason: string) => {
    logger.info({ reason }, 'shutting down: pausing running sandboxes');
    let ok = true;
    for (const step of steps) {
      await (async () => step())().catch((err: unknown) => {
        ok = false;
        logger.error({ err }, 'shutdown step failed');
      });
    }
    return ok;
  };
  return (reason) => (stopping ??= stop(reason));
}

async function main(): Promise<void> {
  const config = loadConfig();
  const { host, port } = parseListenAddress(config.apiAddr);
  // Before anything is set up on the host: a taken port fails the start at once, with nothing to undo.
  await probeListen(host, port).catch((err: Error) => {
    throw new ConfigError(`cannot listen on ${config.apiAddr}: ${err.message}`);
  });
  const machine = await prepareHost(config, logger, undoStartup);
  const t = await openTemplates(config, machine, logger);
  const volumes = new VolumeStore(config.volumes.path);
  const node = await assembleNode(config, machine, t, volumes, logger);
  const { orchestrator } = node;
  const usage = usageSampling(orchestrator, logger);
  const proxy = new SandboxProxy(orchestrator, logger);
  orchestrator.beforeCapture((id, why) => proxy.drain(id, why));
  const agent = clusterMembership(config, machine, t, node, logger);
  const recovered = orchestrator.recover();
  if (recovered.paused || recovered.lost.length) logger.info(recovered, 'recovered sandbox records');

  const app = await buildApp({
    config,
    apiKey: machine.apiKey,
    orchestrator,
    snapshots: t.snapshots,
    templates: { built: t.built, files: t.buildFiles },
    proxy,
    metrics: node.metrics,
    events: node.events,
    usage: { history: usage.history, sampleNow: (id) => usage.sampler.sampleOne(id) },
    logger,
    version,
    volumes,
    dashboard: { activity: node.activity, store: t.snapshotStore, cache: t.snapshotCache },
  });
  await app.listen({ host, port });
  usage.sampler.start();
  undoStartup.length = 0;
  orchestrator.startTtlLoop();
  orchestrator.startMemoryWatch();
  orchestrator.startIdleLoop();
  // The node joins the cluster once `base` exists, so the scheduler places nothing here while the
  // first start builds it (minutes); a failed build still joins, and creates retry it.
  void t.base
    .prepare()
    .catch((err) => logger.error({ err }, 'building the base template failed; creates will retry'))
    .finally(() => {
      if (!signals.received) agent?.start();
    });
  announce(config, machine.apiKeyBanner, { host, port });

  // Drained first, so the cluster stops placing here while the sandboxes are paused.
  signals.stop = stopWith(logger, [
    () => agent?.drain(),
    () => usage.sampler.stop(),
    () => orchestrator.shutdown(),
    () => agent?.stop(),
    () => t.base.close(),
    () => app.close(),
    () => node.chunks.close(),
    () => proxy.close(),
    () => machine.driver.close(),
    () => machine.network.shutdown(),
    () => machine.store.close(),
    () => machine.spawner.close(),
  ]);
  if (signals.received) void signals.stop(signals.received).then((ok) => process.exit(ok ? 0 : 1));
}

main().catch(async (err: unknown) => {
  const msg = err instanceof ConfigError ? err.message : ((err as Error).stack ?? String(err));
  process.stderr.write(`aenv-server: ${msg}\n`);
  await undoStart();
  process.exit(1);
});
