import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { ENVD_PORT } from '@agentenv/protocol';
import { startEnvd } from './server.js';
import { DEFAULT_SUDO_SOCKET } from './sudo/protocol.js';

const USAGE = `usage: aenv-envd [--port ${ENVD_PORT}] [--host 0.0.0.0] [--default-user root]
                 [--sudo-socket ${DEFAULT_SUDO_SOCKET} | --no-sudo]

The AgentENV in-sandbox daemon: process, terminal and filesystem services over the E2B envd
protocol (Connect RPC) plus /health, /files, /init, /envs and /metrics, and the service the
tools bundle's sudo runs commands through (on a Unix socket; --no-sudo turns it off).`;

function parsePort(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) {
    console.error(`aenv-envd: invalid --port '${v}'\n${USAGE}`);
    process.exit(2);
  }
  return n;
}

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: String(ENVD_PORT) },
    host: { type: 'string', default: '0.0.0.0' },
    'default-user': { type: 'string', default: 'root' },
    'sudo-socket': { type: 'string', default: DEFAULT_SUDO_SOCKET },
    'no-sudo': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}

const logger = pino({ name: 'envd', level: process.env.AENV_ENVD_LOG_LEVEL ?? 'info' });
const envd = await startEnvd({
  port: parsePort(values.port),
  host: values.host,
  defaultUser: values['default-user'],
  ...(values['no-sudo'] ? {} : { sudoSocket: values['sudo-socket'] }),
  logger,
});
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    envd.close().finally(() => process.exit(0));
  });
}
