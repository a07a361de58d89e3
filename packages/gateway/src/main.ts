import { pino } from 'pino';
import { GatewayConfigError, loadGatewayConfig } from './config.js';
import { startGateway } from './gateway.js';
import { ConnectScheduler } from './scheduler/connect.js';

/** aenv-gateway: configured from the environment only (AGENTENV-API.md §3). */
async function main(): Promise<void> {
  const config = loadGatewayConfig();
  const logger = pino({ name: 'aenv-gateway', level: config.logLevel });
  const gw = await startGateway(
    config,
    new ConnectScheduler(config.schedulerUrl, config.apiKey, config.schedulerTimeoutMs),
    logger,
  );
  process.stdout.write(
    [
      `AgentENV gateway listening on ${gw.url} (scheduler ${config.schedulerUrl})`,
      'Point the E2B SDK at it with:',
      `export E2B_API_URL=${gw.url} E2B_SANDBOX_URL=${gw.url} E2B_API_KEY=${config.apiKey}`,
      '',
    ].join('\n'),
  );
  const stop = () => void gw.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err: unknown) => {
  const msg = err instanceof GatewayConfigError ? err.message : ((err as Error).stack ?? String(err));
  process.stderr.write(`aenv-gateway: ${msg}\n`);
  process.exit(1);
});
