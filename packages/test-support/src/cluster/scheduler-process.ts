import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { packageDir } from '../paths.js';
import { untilReady } from './ready.js';

const BIN = path.join(packageDir('@agentenv/scheduler'), 'bin', 'aenv-scheduler.js');

export const CLUSTER_KEY = 'e2b_' + 'c1a5fe2dc1a5fe2d'.repeat(2);

export interface SchedulerProcess {
  url: string;
  port: number;
  child: ChildProcess;
  output(): string;
  /** SIGTERM (a clean stop) or SIGKILL (a crash). */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

export interface SchedulerProcessOptions {
  port: number;
  /** `memory` (default) or a redis:// URL. */
  store?: string;
  apiKey?: string;
  /** Short intervals make health transitions quick in tests. */
  heartbeatIntervalMs?: number;
  env?: Record<string, string>;
}

/** Starts `aenv-scheduler` on 127.0.0.1:`port` and waits until /health answers. */
export async function startSchedulerProcess(o: SchedulerProcessOptions): Promise<SchedulerProcess> {
  const url = `http://127.0.0.1:${o.port}`;
  const child = spawn(process.execPath, [BIN], {
    env: {
      ...process.env,
      SCHEDULER_ADDR: `127.0.0.1:${o.port}`,
      AENV_SCHEDULER_STORE: o.store ?? 'memory',
      AENV_API_KEY: o.apiKey ?? CLUSTER_KEY,
      AENV_LOG_LEVEL: process.env.AENV_TEST_LOG_LEVEL ?? 'warn',
      ...(o.heartbeatIntervalMs
        ? { AENV_SCHEDULER_HEARTBEAT_INTERVAL_MS: String(o.heartbeatIntervalMs) }
        : {}),
      ...o.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await untilReady(
    () =>
      fetch(`${url}/health`).then(
        (r) => r.status === 204,
        () => false,
      ),
    exited,
    () => `aenv-scheduler did not answer /health on ${o.port} (exit ${child.exitCode}):\n${out}`,
    20_000,
  );
  return {
    url,
    port: o.port,
    child,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
