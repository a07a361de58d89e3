import { readFileSync } from 'node:fs';
import { pino } from 'pino';
import { startScheduler } from './app.js';
import { systemClock } from './clock.js';
import { ConfigError, loadConfig } from './config.js';
import { DomainError } from '@agentenv/common';
import { MemoryStore } from './store/memory-store.js';
import { RedisStore } from './store/redis-store.js';
import type { SchedulerStore } from './store/store.js';

const version = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({ name: 'aenv-scheduler', level: config.logLevel });
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

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    await app.close();
    await store.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

main().catch((err: unknown) => {
  const msg =
    err instanceof ConfigError || err instanceof DomainError
      ? err.message
      : ((err as Error).stack ?? String(err));
  process.stderr.write(`aenv-scheduler: ${msg}\n`);
  process.exit(1);
});
