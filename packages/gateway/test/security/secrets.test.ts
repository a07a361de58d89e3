import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually, faultOnSigusr2 } from '@agentenv/test-support';
import { startSchedulerProcess, type SchedulerProcess } from '@agentenv/test-support/cluster';

const GATEWAY_BIN = fileURLToPath(new URL('../../bin/aenv-gateway.js', import.meta.url));
const KEY = 'e2b_' + '5ec7e75ec7e75ec7'.repeat(2);
const SCHEDULER_PORT = 19751;
const GATEWAY_PORT = 19752;
const GATEWAY_URL = `http://127.0.0.1:${GATEWAY_PORT}`;

interface Proc {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function startGateway(env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [GATEWAY_BIN], {
    env: {
      ...process.env,
      GATEWAY_ADDR: `127.0.0.1:${GATEWAY_PORT}`,
      AENV_SCHEDULER_URL: `http://127.0.0.1:${SCHEDULER_PORT}`,
      AENV_LOG_LEVEL: 'debug',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

const healthy = (url: string) =>
  fetch(`${url}/health`).then(
    (r) => r.status === 204,
    () => false,
  );

describe('the gateway and the scheduler keep the key secret and fail safely', () => {
  let dir = '';
  let keyFile = '';
  let scheduler: SchedulerProcess | undefined;
  const started: Proc[] = [];

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'aenv-sec-'));
    keyFile = path.join(dir, 'api-key');
    writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
  });
  afterEach(async () => {
    for (const p of started.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      await p.exited;
    }
    await scheduler?.stop('SIGKILL');
    scheduler = undefined;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('gateway: the banner says where the key is, a rejection is logged redacted and it serves on', async () => {
    scheduler = await startSchedulerProcess({ port: SCHEDULER_PORT, apiKey: KEY });
    const gw = startGateway({
      AENV_API_KEY: '',
      AENV_API_KEY_FILE: keyFile,
      ...faultOnSigusr2('reject', KEY),
    });
    started.push(gw);
    await eventually(async () => expect(await healthy(GATEWAY_URL)).toBe(true));
    await eventually(() => expect(gw.output()).toContain(`E2B_API_KEY=$(cat ${keyFile})`));
    const listed = await fetch(`${GATEWAY_URL}/v2/sandboxes`, { headers: { 'x-api-key': KEY } });
    expect(listed.status).toBe(200);

    gw.child.kill('SIGUSR2');
    await eventually(() => expect(gw.output()).toContain('unhandled rejection; serving on'));
    expect(await healthy(GATEWAY_URL)).toBe(true);
    expect(gw.output()).toContain('"apiKey":"[Redacted]"');
    expect(gw.output()).not.toContain(KEY);
  });

  it('gateway: an uncaught exception stops it with a non-zero exit', async () => {
    const gw = startGateway({ AENV_API_KEY: KEY, ...faultOnSigusr2('throw', KEY) });
    started.push(gw);
    await eventually(async () => expect(await healthy(GATEWAY_URL)).toBe(true));
    expect(gw.output()).toContain('E2B_API_KEY=$AENV_API_KEY');
    gw.child.kill('SIGUSR2');
    expect(await gw.exited).toBe(1);
    expect(gw.output()).toContain('uncaught exception; stopping');
    expect(gw.output()).not.toContain(KEY);
  });

  it('scheduler: a rejection is logged redacted and it serves on; an uncaught exception stops it', async () => {
    scheduler = await startSchedulerProcess({
      port: SCHEDULER_PORT,
      apiKey: KEY,
      env: { AENV_LOG_LEVEL: 'debug', ...faultOnSigusr2('reject', KEY) },
    });
    scheduler.child.kill('SIGUSR2');
    await eventually(() => expect(scheduler!.output()).toContain('unhandled rejection; serving on'));
    expect(await healthy(scheduler.url)).toBe(true);
    expect(scheduler.output()).toContain('"apiKey":"[Redacted]"');
    expect(scheduler.output()).not.toContain(KEY);
    await scheduler.stop();

    scheduler = await startSchedulerProcess({
      port: SCHEDULER_PORT,
      apiKey: KEY,
      env: { AENV_LOG_LEVEL: 'debug', ...faultOnSigusr2('throw', KEY) },
    });
    const exited = new Promise<number | null>((resolve) => scheduler!.child.once('exit', resolve));
    scheduler.child.kill('SIGUSR2');
    expect(await exited).toBe(1);
    expect(scheduler.output()).toContain('uncaught exception; stopping');
    expect(scheduler.output()).toContain('shutting down');
    expect(scheduler.output()).not.toContain(KEY);
  });
});
