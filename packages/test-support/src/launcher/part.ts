import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { request } from 'node:https';
import { eventually } from '../eventually.js';

/**
 * One running part of a cluster (a node, a scheduler, a gateway, redis-server) with its own
 * environment, its output kept in memory and appended to `<logDir>/<name>.log`.
 */
export interface Proc {
  name: string;
  child: ChildProcess;
  log: string;
  output(): string;
  exited: Promise<void>;
  /** SIGTERM (a clean stop) or SIGKILL (a crash); resolves once it exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface SpawnOptions {
  logDir: string;
  /**
   * In a process group of its own, so that Ctrl-C on a terminal reaches the launcher only, which
   * stops the parts in order.
   */
  detached?: boolean;
}

export function spawnProc(
  name: string,
  cmd: string,
  args: string[],
  env: Record<string, string>,
  o: SpawnOptions,
): Proc {
  mkdirSync(o.logDir, { recursive: true });
  const logPath = `${o.logDir}/${name}.log`;
  const log = createWriteStream(logPath, { flags: 'a' });
  log.write(`--- ${name} started ${new Date().toISOString()}\n`);
  let out = '';
  const child = spawn(cmd, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: o.detached ?? false,
  });
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-200_000);
    log.write(d);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      log.end();
      resolve();
    }),
  );
  return {
    name,
    child,
    log: logPath,
    output: () => out,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** How to reach a part's /health: over HTTP, or HTTPS trusting `ca` and asking for `servername`. */
export interface HealthCheck {
  url: string;
  ca?: string;
  servername?: string;
}

/** A GET's status over HTTP or HTTPS, or 0 if no answer. */
export function statusOf({ url, ca, servername }: HealthCheck): Promise<number> {
  if (url.startsWith('http:'))
    return fetch(url).then(
      (r) => (void r.body?.cancel(), r.status),
      () => 0,
    );
  return new Promise((resolve) => {
    const req = request(url, { ca, servername }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** Waits until `ok` answers true; fails as soon as the process exits instead. */
export async function untilReady(
  ok: () => Promise<boolean>,
  exited: Promise<void>,
  why: () => string,
  timeoutMs = 20_000,
): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  await eventually(
    async () => {
      if (!gone && !(await ok())) throw new Error(why());
    },
    { timeoutMs },
  );
  if (gone) throw new Error(`exited before it was ready: ${why()}`);
}

/** The last lines a part wrote, for an error that says why it did not start. */
const tail = (p: Proc) => p.output().split('\n').slice(-30).join('\n');

/**
 * Waits until `p` is ready; if it exits first or is not ready in time, it is killed and the
 * error names its log and quotes its last lines.
 */
export async function untilPartReady(p: Proc, ok: () => Promise<boolean>, timeoutMs: number): Promise<Proc> {
  const why = () =>
    `${p.name} did not become ready (exit code ${p.child.exitCode}, waited up to ${timeoutMs / 1000} s); see ${p.log}:\n${tail(p)}`;
  await untilReady(ok, p.exited, why, timeoutMs).catch(async (err: unknown) => {
    await p.stop('SIGKILL');
    throw err;
  });
  return p;
}
