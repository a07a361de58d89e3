/**
 * A whole cluster on one machine: `npm run cluster -- --nodes 3` starts redis-server (with an
 * append-only file), the scheduler, the gateway (when packages/gateway is in this checkout) and
 * N nodes; `--replicas 2` runs two schedulers and two gateways on the one Redis, each node with
 * its own port, home, runtime dir, network tag and host range, all sharing one posix_fs snapshot
 * repository and one base-template cache. It prints the E2B_* lines to export and, on Ctrl-C,
 * stops everything (nodes pause their sandboxes first) and checks nothing was left behind.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { pingRedis } from '@agentenv/test-support/cluster';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const bin = (pkg: string, name: string) => path.join(ROOT, 'packages', pkg, 'bin', `${name}.js`);

const { values: opt } = parseArgs({
  options: {
    nodes: { type: 'string', default: '3' },
    replicas: { type: 'string', default: '1' },
    home: { type: 'string', default: '/var/lib/aenv-cluster' },
    'runtime-dir': { type: 'string', default: '/run/aenv-cluster' },
    'scheduler-port': { type: 'string', default: '9090' },
    'gateway-port': { type: 'string', default: '8080' },
    'node-port': { type: 'string', default: '8100' },
    'redis-port': { type: 'string', default: '6390' },
    /** A /16 cut into one /19 per node: node i's sandboxes get host-side addresses from its part. */
    'host-range': { type: 'string', default: '10.220.0.0/16' },
    tag: { type: 'string', default: 'cl' },
    'pool-size': { type: 'string', default: '1' },
    'max-sandboxes': { type: 'string', default: '20' },
    'memory-store': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});

if (opt.help) {
  console.log(
    `usage: npm run cluster -- [--nodes N] [--replicas R (schedulers and gateways, on ports P+k)] [--home DIR] [--runtime-dir DIR] [--scheduler-port P]
       [--gateway-port P] [--node-port P (node i listens on P+i)] [--redis-port P]
       [--host-range A.B.0.0/16 (one /19 per node)] [--tag T (node i: tag Ti)] [--pool-size N]
       [--max-sandboxes N] [--memory-store (no redis)]`,
  );
  process.exit(0);
}

const int = (name: keyof typeof opt, min: number, max: number): number => {
  const v = Number(opt[name]);
  if (!Number.isInteger(v) || v < min || v > max) die(`--${name} must be an integer from ${min} to ${max}`);
  return v;
};
const N = int('nodes', 1, 8);
const R = int('replicas', 1, 3);
if (R > 1 && opt['memory-store']) die('--replicas needs Redis: the replicas share their state through it');
const RANGE = /^(\d{1,3})\.(\d{1,3})\.0\.0\/16$/.exec(opt['host-range']!);
if (!RANGE || Number(RANGE[1]) > 255 || Number(RANGE[2]) > 255)
  die('--host-range must be a /16, e.g. 10.220.0.0/16');
const hostRange = (i: number) => `${RANGE[1]}.${RANGE[2]}.${(i - 1) * 32}.0/19`;
const SCHED_PORT = int('scheduler-port', 1, 65535 - R);
const GATEWAY_PORT = int('gateway-port', 1, 65535 - R);
const NODE_PORT = int('node-port', 1, 65535 - N);
const REDIS_PORT = int('redis-port', 1, 65535);
if (!/^[a-z0-9]{1,5}$/.test(opt.tag!)) die('--tag must be 1-5 characters of [a-z0-9]');
const HOME = path.resolve(opt.home!);
const LOGS = path.join(HOME, 'logs');

function die(msg: string): never {
  console.error(`cluster: ${msg}`);
  process.exit(1);
}

interface Proc {
  name: string;
  child: ChildProcess;
  exited: Promise<void>;
}
const procs: Proc[] = [];

/** Starts a process whose output goes to logs/<name>.log. */
function start(name: string, cmd: string, args: string[], env: Record<string, string>): Proc {
  const log = createWriteStream(path.join(LOGS, `${name}.log`), { flags: 'a' });
  log.write(`--- ${name} started ${new Date().toISOString()}\n`);
  // In its own process group: Ctrl-C reaches this script only, which stops the parts in order.
  const child = spawn(cmd, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  child.stdout!.pipe(log, { end: false });
  child.stderr!.pipe(log, { end: false });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => log.end());
  const p = { name, child, exited };
  procs.push(p);
  return p;
}

async function until(what: string, p: Proc, ok: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (p.child.exitCode !== null)
      throw new Error(`${what} exited with ${p.child.exitCode}; see ${path.join(LOGS, `${p.name}.log`)}`);
    if (Date.now() > deadline) throw new Error(`${what} was not ready in ${ms / 1000} s; see ${LOGS}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const healthy = (url: string) => () =>
  fetch(`${url}/health`).then(
    (r) => r.status === 204,
    () => false,
  );
const pong = (port: number) => () => pingRedis(port);

/** The cluster's API key: generated once into its home (0600), the same for every component. */
function clusterKey(): string {
  const file = path.join(HOME, 'secrets', 'api-key');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const key = `e2b_${randomBytes(20).toString('hex')}`;
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return key;
}

/** A node's home, sharing the base root filesystem and template captures with the others. */
function nodeHome(i: number): string {
  const home = path.join(HOME, `node-${i}`);
  mkdirSync(home, { recursive: true });
  for (const shared of ['layers', 'templates']) {
    mkdirSync(path.join(HOME, 'shared', shared), { recursive: true });
    if (!existsSync(path.join(home, shared)))
      symlinkSync(path.join(HOME, 'shared', shared), path.join(home, shared));
  }
  return home;
}

const nodeUrl = (i: number) => `http://127.0.0.1:${NODE_PORT + i}`;
const nodeTag = (i: number) => `${opt.tag}${i}`;

function startNode(i: number, key: string, schedulerUrl: string): Proc {
  return start(`node-${i}`, process.execPath, [bin('node', 'aenv-server')], {
    API_ADDR: `127.0.0.1:${NODE_PORT + i}`,
    AENV_HOME_PATH: nodeHome(i),
    AENV_RUNTIME_PATH: path.join(opt['runtime-dir']!, `node-${i}`),
    AENV_NETWORK_NODE_TAG: nodeTag(i),
    AENV_NETWORK_HOST_RANGE: hostRange(i),
    AENV_SNAPSHOT_STORE: path.join(HOME, 'snapshot-store'),
    AENV_NODE_ID: `node-${i}`,
    AENV_ADVERTISE_URL: nodeUrl(i),
    AENV_SCHEDULER_URL: schedulerUrl,
    AENV_API_KEY: key,
    AENV_POOL_SIZE: opt['pool-size']!,
    AENV_MAX_SANDBOXES: opt['max-sandboxes']!,
  });
}

/**
 * The first create on a fresh machine builds the base template (a Debian root filesystem, about
 * a minute); one create and kill on node 1 does it once, so the other nodes find it cached.
 */
async function warmBase(key: string): Promise<void> {
  const headers = { 'x-api-key': key, 'content-type': 'application/json' };
  const r = await fetch(`${nodeUrl(1)}/sandboxes`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ templateID: 'base', timeout: 60 }),
    signal: AbortSignal.timeout(15 * 60_000),
  });
  if (r.status !== 201)
    throw new Error(`node-1 could not start a base sandbox: ${r.status} ${await r.text()}`);
  const { sandboxID } = (await r.json()) as { sandboxID: string };
  await fetch(`${nodeUrl(1)}/sandboxes/${sandboxID}`, { method: 'DELETE', headers });
}

async function stop(group: Proc[]): Promise<void> {
  for (const p of group)
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
  await Promise.all(group.map((p) => p.exited));
}

/**
 * The gateway first, then the nodes together (each drains at the scheduler and pauses its
 * sandboxes, so the scheduler must still run), then the scheduler and redis.
 */
async function stopAll(): Promise<void> {
  const isNode = (p: Proc) => p.name.startsWith('node-');
  await stop(procs.filter((p) => p.name.startsWith('gateway')));
  await stop(procs.filter(isNode));
  await stop(procs.filter((p) => p.name.startsWith('scheduler')));
  await stop(procs.filter((p) => p.name === 'redis'));
}

const tags = () => Array.from({ length: N }, (_, k) => nodeTag(k + 1));

/** The nodes' cgroup parents (`aenv-<tag>`, under each v1 controller or the v2 root), once empty. */
function cgroupParents(): string[] {
  const root = '/sys/fs/cgroup';
  const dirs = [root, ...readdirSync(root).map((c) => path.join(root, c))];
  return dirs.flatMap((d) => tags().map((t) => path.join(d, `aenv-${t}`))).filter((d) => existsSync(d));
}

/** The drivers leave their (empty) parent cgroups; a stopped cluster removes them. */
function removeCgroupParents(): void {
  for (const d of cgroupParents()) {
    try {
      rmdirSync(d);
    } catch {
      // Still holding processes: reported as left behind.
    }
  }
}

/** What the nodes' tags left on the machine (namespaces, iptables chains, cgroups, runsc). */
function leftovers(): string[] {
  removeCgroupParents();
  const netns = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout ?? '';
  const rules = spawnSync('iptables-save', [], { encoding: 'utf8' }).stdout ?? '';
  const ps = spawnSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' }).stdout ?? '';
  return [
    ...netns.split('\n').filter((l) => tags().some((t) => l.startsWith(`aenv-${t}-`))),
    ...rules.split('\n').filter((l) => tags().some((t) => l.includes(`AENV-${t}-`))),
    ...cgroupParents(),
    ...ps.split('\n').filter((l) => l.includes('runsc') && l.includes(opt['runtime-dir']!)),
  ];
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) die('run as root (nodes need namespaces, cgroups and iptables)');
  if (!existsSync(path.join(ROOT, 'packages/node/dist/main.js'))) die('build first: npm run build');
  mkdirSync(LOGS, { recursive: true });
  const key = clusterKey();
  const gateway = existsSync(bin('gateway', 'aenv-gateway'));
  const replicas = Array.from({ length: R }, (_, k) => k);
  const suffix = (k: number) => (k ? String(k + 1) : '');
  const schedulerUrls = replicas.map((k) => `http://127.0.0.1:${SCHED_PORT + k}`);
  // Every node and gateway knows every replica and goes to the next when one does not answer.
  const schedulerUrl = schedulerUrls.join(',');

  let store = 'memory';
  if (!opt['memory-store']) {
    if (spawnSync('redis-server', ['--version']).status !== 0)
      die('redis-server is missing (bash scripts/setup.sh installs it), or pass --memory-store');
    const dir = path.join(HOME, 'redis');
    mkdirSync(dir, { recursive: true });
    const redis = start(
      'redis',
      'redis-server',
      [
        ...['--port', String(REDIS_PORT), '--bind', '127.0.0.1', '--dir', dir],
        // The scheduler's drain marks, bindings and reservations survive a Redis restart.
        ...['--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec'],
      ],
      {},
    );
    await until('redis-server', redis, pong(REDIS_PORT), 10_000);
    store = `redis://127.0.0.1:${REDIS_PORT}`;
    console.log(`redis-server      127.0.0.1:${REDIS_PORT}`);
  }

  for (const k of replicas) {
    const scheduler = start(`scheduler${suffix(k)}`, process.execPath, [bin('scheduler', 'aenv-scheduler')], {
      SCHEDULER_ADDR: `127.0.0.1:${SCHED_PORT + k}`,
      AENV_SCHEDULER_STORE: store,
      AENV_API_KEY: key,
    });
    await until(`aenv-scheduler${suffix(k)}`, scheduler, healthy(schedulerUrls[k]!), 20_000);
    console.log(
      `aenv-scheduler${suffix(k).padEnd(4)}${schedulerUrls[k]} (store ${store === 'memory' ? 'memory' : 'redis'})`,
    );
  }

  const first = startNode(1, key, schedulerUrl);
  await until('node-1', first, healthy(nodeUrl(1)), 60_000);
  console.log(
    `node-1            ${nodeUrl(1)}: building or checking the base template (a minute on a fresh machine)`,
  );
  await warmBase(key);
  const rest = Array.from({ length: N - 1 }, (_, k) => startNode(k + 2, key, schedulerUrl));
  await Promise.all(rest.map((p, k) => until(`node-${k + 2}`, p, healthy(nodeUrl(k + 2)), 60_000)));
  for (let i = 1; i <= N; i++)
    console.log(
      `node-${i}            ${nodeUrl(i)} (home ${path.join(HOME, `node-${i}`)}, tag ${nodeTag(i)}, ${hostRange(i)})`,
    );

  let apiUrl = nodeUrl(1);
  if (gateway) {
    for (const k of replicas) {
      const gatewayUrl = `http://127.0.0.1:${GATEWAY_PORT + k}`;
      const g = start(`gateway${suffix(k)}`, process.execPath, [bin('gateway', 'aenv-gateway')], {
        GATEWAY_ADDR: `127.0.0.1:${GATEWAY_PORT + k}`,
        AENV_SCHEDULER_URL: schedulerUrl,
        AENV_API_KEY: key,
      });
      await until(`aenv-gateway${suffix(k)}`, g, healthy(gatewayUrl), 20_000);
      console.log(`aenv-gateway${suffix(k).padEnd(6)}${gatewayUrl}`);
    }
    apiUrl = `http://127.0.0.1:${GATEWAY_PORT}`;
  } else {
    console.log(
      'aenv-gateway      not started: packages/gateway is not in this checkout (the SDK talks to node-1)',
    );
  }
  console.log(
    [
      '',
      `Logs in ${LOGS}. Point the E2B SDK at the cluster with:`,
      `export E2B_API_URL=${apiUrl} E2B_SANDBOX_URL=${apiUrl} E2B_API_KEY=${key}`,
      'Ctrl-C stops everything (running sandboxes are paused first).',
      '',
    ].join('\n'),
  );
  const gone = await Promise.race(procs.map((p) => p.exited.then(() => p)));
  if (stopping) return;
  console.error(`cluster: ${gone.name} exited (code ${gone.child.exitCode}); stopping the rest`);
  await shutdown();
}

let stopping: Promise<void> | undefined;
function shutdown(): Promise<void> {
  stopping ??= (async () => {
    await stopAll();
    const left = leftovers();
    if (left.length) {
      console.error(`cluster: left behind:\n  ${left.join('\n  ')}`);
      process.exit(1);
    }
    console.log('cluster stopped; nothing left behind');
    process.exit(0);
  })();
  return stopping;
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    console.log(`\n${sig}: stopping the cluster`);
    void shutdown();
  });
}

main().catch(async (err: unknown) => {
  console.error(`cluster: ${(err as Error).message}`);
  await stopAll();
  process.exit(1);
});
