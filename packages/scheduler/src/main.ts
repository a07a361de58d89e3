import { startScheduler } from './server/app.js';
import { systemClock } from './clock.js';
import { ConfigError, loadConfig } from './config.js';
import { DomainError, installProcessPolicy, packageVersion, processLogger } from '@agentenv/common';
import { MemoryStore } from './store/memory-store.js';
import { RedisStore } from './store/redis-store.js';
import type { SchedulerStore } from './store/store.js';

const version = packageVersion('@agentenv/scheduler', import.meta.url);

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = processLogger('aenv-scheduler', config.logLevel);
  let stopping: Promise<void> | undefined;
  let close = () => Promise.resolve();
  const stop = (reason: string) =>
    (stopping ??= (async () => {
      logger.info({ reason }, 'shutting down');
      await close();
    })());
  // Nodes re-register by heartbeat, so a stop loses nothing a fresh scheduler does not get back.
  installProcessPolicy({ logger, shutdown: stop, shutdownTimeoutMs: 20_000 });
  const store: SchedulerStore =
    config.store === 'memory'
      ? new MemoryStore(systemClock)
      : await RedisStore.open({ url: config.store, clock: systemClock });
  let app;
  try {
    app = await startScheduler({
      host: config.addr.host,
      port: config.addr.port,
      ...(config.metricsAddr ? { metrics: config.metricsAddr } : {}),
      apiKey: config.apiKey,
      store,
      settings: config.settings,
      logger,
    });
  } catch (err) {
    await store.close();
    throw err;
  }
  const where = `${config.addr.host}:${app.port}`;
  logger.info(
    { addr: where, store: config.store === 'memory' ? 'memory' : 'redis', version },
    'scheduler listening',
  );
  process.stdout.write(
    `AgentENV scheduler ${version} listening on ${where} (store ${config.store === 'memory' ? 'memory' : 'redis'})\n`,
  );

  close = async () => {
    await app.close();
    await store.close();
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const)
    process.on(signal, () => void stop(signal).then(() => process.exit(0)));
}

main().catch((err: unknown) => {
  const msg =
    err instanceof ConfigError || err instanceof DomainError
      ? err.message
      : ((err as Error).stack ?? String(err));
  process.stderr.write(`aenv-scheduler: ${msg}\n`);
  process.exit(1);
});
