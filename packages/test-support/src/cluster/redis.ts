import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { untilReady } from './ready.js';

export interface RedisProcess {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Why redis-server cannot run here, or undefined when it can (tests skip with this reason). */
export function redisMissing(): string | undefined {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? undefined : 'redis-server is not installed (scripts/setup.sh installs it)';
}

/** A private redis-server on 127.0.0.1:`port` with its own directory, no persistence. */
export async function startRedis(port: number): Promise<RedisProcess> {
  const dir = mkdtempSync(path.join(tmpdir(), `aenv-redis-${port}-`));
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await untilReady(
    () => pingRedis(port),
    exited,
    () => `redis-server on ${port} did not answer:\n${out}`,
    10_000,
  );
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Whether a redis-server answers PING on 127.0.0.1:`port`. */
export function pingRedis(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('error', () => resolve(false));
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => {
      resolve(d.toString().startsWith('+PONG'));
      s.destroy();
    });
  });
}
