import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readdirSync, rmdirSync } from 'node:fs';
import { request } from 'node:https';
import { eventually } from '../eventually.js';

/**
 * Real processes of a test cluster: a node, the scheduler, the gateway, redis-server. Each runs
 * with its own environment, its output kept in memory and in a log file.
 */
export interface Proc {
  name: string;
  child: ChildProcess;
  output(): string;
  /** SIGTERM (a clean stop) or SIGKILL (a crash); resolves once it exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export const LOG_DIR = '/var/lib/aenv-h9/logs';

export function spawnProc(name: string, cmd: string, args: string[], env: Record<string, string>): Proc {
  mkdirSync(LOG_DIR, { recursive: true });
  const log = createWriteStream(`${LOG_DIR}/${name}.log`, { flags: 'a' });
  log.write(`--- ${name} started ${new Date().toISOString()}\n`);
  let out = '';
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
    output: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** A GET's status over HTTP or HTTPS (trusting `ca`, asking for `servername`), or 0 if no answer. */
export function statusOf(url: string, opts: { ca?: string; servername?: string } = {}): Promise<number> {
  if (url.startsWith('http:'))
    return fetch(url).then(
      (r) => (void r.body?.cancel(), r.status),
      () => 0,
    );
  return new Promise((resolve) => {
    const req = request(url, { ca: opts.ca, servername: opts.servername }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** Starts a process and waits until `url` answers 204 (health), failing if it exits first. */
export async function startHealthy(
  name: string,
  cmd: string,
  args: string[],
  env: Record<string, string>,
  url: string,
  opts: { ca?: string; servername?: string; timeoutMs?: number } = {},
): Promise<Proc> {
  const p = spawnProc(name, cmd, args, env);
  await eventually(
    async () => {
      if (p.child.exitCode === null && (await statusOf(url, opts)) !== 204)
        throw new Error(`${name} did not answer ${url}:\n${p.output()}`);
    },
    { timeoutMs: opts.timeoutMs ?? 60_000 },
  ).catch((err: Error) => {
    void p.stop('SIGKILL');
    throw err;
  });
  if (p.child.exitCode !== null) throw new Error(`${name} exited with ${p.child.exitCode}:\n${p.output()}`);
  return p;
}

/**
 * Removes the (empty, once its nodes stopped) cgroups a node left under every controller:
 * nodes create `aenv-<tag>` parents and keep them.
 */
export function removeCgroups(prefix: string): void {
  const roots = ['/sys/fs/cgroup', ...readdirSync('/sys/fs/cgroup').map((c) => `/sys/fs/cgroup/${c}`)];
  const remove = (dir: string) => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) remove(`${dir}/${e.name}`);
    try {
      rmdirSync(dir);
    } catch {
      // still in use, or not a cgroup
    }
  };
  for (const root of roots) {
    let entries: string[];
    try {
      entries = readdirSync(root);
    } catch {
      continue;
    }
    for (const name of entries) if (name.startsWith(prefix)) remove(`${root}/${name}`);
  }
}
