import { DomainError, installProcessPolicy, keyFromEnv, processLogger } from '@agentenv/common';
import { GatewayConfigError, loadGatewayConfig } from './config.js';
import { startGateway } from './gateway.js';
import { ConnectScheduler } from './scheduler/connect.js';

/** aenv-gateway: configured from the environment only (AGENTENV-API.md §3). */
async function main(): Promise<void> {
  const config = loadGatewayConfig();
  const logger = processLogger('aenv-gateway', config.logLevel);
  let close = () => Promise.resolve();
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= close());
  // The gateway holds no sandbox: stopping is closing its listener and connections.
  installProcessPolicy({ logger, shutdown: stop, shutdownTimeoutMs: 30_000 });
  const gw = await startGateway(
    config,
    new ConnectScheduler(config.schedulerUrl, config.apiKey, config.schedulerTimeoutMs),
    logger,
  );
  close = () => gw.close();
  // The key is the operator's (the gateway never makes one): the banner says where it is.
  const key = keyFromEnv(process.env)!;
  process.stdout.write(
    [
      `AgentENV gateway listening on ${gw.url} (scheduler ${config.schedulerUrl})`,
      'Point the E2B SDK at it with:',
      `export E2B_API_URL=${gw.url} E2B_SANDBOX_URL=${gw.url} E2B_API_KEY=${key.shell}`,
      '',
    ].join('\n'),
  );
  process.on('SIGTERM', () => void stop().then(() => process.exit(0)));
  process.on('SIGINT', () => void stop().then(() => process.exit(0)));
}

main().catch((err: unknown) => {
  const msg =
    err instanceof GatewayConfigError || err instanceof DomainError
      ? err.message
      : ((err as Error).stack ?? String(err));
  process.stderr.write(`aenv-gateway: ${msg}\n`);
  process.exit(1);
});
