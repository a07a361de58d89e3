/**
 * A whole cluster on one machine: `npm run cluster -- --nodes 3` starts redis-server (with an
 * append-only file), the scheduler, the gateway (when packages/gateway is in this checkout) and
 * N nodes; `--replicas 2` runs two schedulers and two gateways on the one Redis, each node with
 * its own port, home, runtime dir, network tag and host range, all sharing one posix_fs snapshot
 * repository and one base-template cache. It prints the E2B_* lines to export and, on Ctrl-C,
 * stops everything (nodes pause their sandboxes first) and checks nothing was left behind.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ClusterLauncher, GATEWAY_BIN, logDir, type ClusterLayout } from '@agentenv/test-support/launcher';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

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
const hostRange = (k: number) => `${RANGE[1]}.${RANGE[2]}.${k * 32}.0/19`;
const SCHED_PORT = int('scheduler-port', 1, 65535 - R);
const GATEWAY_PORT = int('gateway-port', 1, 65535 - R);
const NODE_PORT = int('node-port', 1, 65535 - N);
const REDIS_PORT = int('redis-port', 1, 65535);
if (!/^[a-z0-9]{1,5}$/.test(opt.tag!)) die('--tag must be 1-5 characters of [a-z0-9]');
const HOME = path.resolve(opt.home!);
const nodeTag = (k: number) => `${opt.tag}${k + 1}`;

function die(msg: string): never {
  console.error(`cluster: ${msg}`);
  process.exit(1);
}

/** The cluster's API key: generated once into its home (0600), the same for every component. */
function clusterKey(): string {
  const file = path.join(HOME, 'secrets', 'api-key');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const key = `e2b_${randomBytes(20).toString('hex')}`;
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return key;
}

/**
 * This cluster's place on the machine, from the flags: node i (from 1) on port P+i with its own
 * home, runtime dir, tag Ti and /19 of the host range; replica k of the others on port P+k.
 */
function layoutOf(apiKey: string): ClusterLayout {
  const node = (i: number) => `node-${i}`;
  return {
    home: HOME,
    sharedCache: path.join(HOME, 'shared'),
    apiKey,
    redisPort: REDIS_PORT,
    schedulerAddr: (k) => `127.0.0.1:${SCHED_PORT + k}`,
    gatewayAddr: (k) => `127.0.0.1:${GATEWAY_PORT + k}`,
    node: (k) => ({
      name: node(k + 1),
      id: node(k + 1),
      addr: `127.0.0.1:${NODE_PORT + k + 1}`,
      home: path.join(HOME, node(k + 1)),
      runtimeDir: path.join(opt['runtime-dir']!, node(k + 1)),
      tag: nodeTag(k),
      hostRange: hostRange(k),
    }),
    poolSize: Number(opt['pool-size']),
    maxSandboxesPerNode: Number(opt['max-sandboxes']),
  };
}

/** Started by main, once it checked it may; stopped by shutdown. */
let cluster: ClusterLauncher | undefined;

/**
 * The first create on a fresh machine builds the base template (a Debian root filesystem, about
 * a minute); one create and kill on node 1 does it once, so the other nodes find it cached.
 */
async function warmBase(c: ClusterLauncher): Promise<void> {
  const headers = { 'x-api-key': c.layout.apiKey, 'content-type': 'application/json' };
  const r = await fetch(`${c.nodeUrl(0)}/sandboxes`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ templateID: 'base', timeout: 60 }),
    signal: AbortSignal.timeout(15 * 60_000),
  });
  if (r.status !== 201)
    throw new Error(`node-1 could not start a base sandbox: ${r.status} ${await r.text()}`);
  const { sandboxID } = (await r.json()) as { sandboxID: string };
  await fetch(`${c.nodeUrl(0)}/sandboxes/${sandboxID}`, { method: 'DELETE', headers });
}

const tags = () => Array.from({ length: N }, (_, k) => nodeTag(k));

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
  if (!existsSync(path.join(ROOT, 'packages/node/dist/bundle/main.js'))) die('build first: npm run build');
  const memory = opt['memory-store']!;
  if (!memory && spawnSync('redis-server', ['--version']).status !== 0)
    die('redis-server is missing (bash scripts/setup.sh installs it), or pass --memory-store');
  const c = new ClusterLauncher(layoutOf(clusterKey()), {
    replicas: R,
    store: memory ? 'memory' : 'redis',
    detached: true,
  });
  cluster = c;
  const suffix = (k: number) => (k ? String(k + 1) : '');

  if (!memory) {
    await c.startRedis();
    console.log(`redis-server      127.0.0.1:${REDIS_PORT}`);
  }
  for (let k = 0; k < R; k++) {
    await c.startScheduler(k);
    console.log(
      `aenv-scheduler${suffix(k).padEnd(4)}${c.schedulerUrls[k]} (store ${memory ? 'memory' : 'redis'})`,
    );
  }

  await c.startNode(0);
  console.log(
    `node-1            ${c.nodeUrl(0)}: building or checking the base template (a minute on a fresh machine)`,
  );
  await warmBase(c);
  await Promise.all(Array.from({ length: N - 1 }, (_, k) => c.startNode(k + 1)));
  for (let k = 0; k < N; k++) {
    const node = c.layout.node(k);
    console.log(
      `${node.name}            ${c.nodeUrl(k)} (home ${node.home}, tag ${node.tag}, ${node.hostRange})`,
    );
  }

  let apiUrl = c.nodeUrl(0);
  if (existsSync(GATEWAY_BIN)) {
    for (let k = 0; k < R; k++) {
      await c.startGateway(k);
      console.log(`aenv-gateway${suffix(k).padEnd(6)}${c.gatewayUrls[k]}`);
    }
    apiUrl = c.gatewayUrls[0]!;
  } else {
    console.log(
      'aenv-gateway      not started: packages/gateway is not in this checkout (the SDK talks to node-1)',
    );
  }
  console.log(
    [
      '',
      `Logs in ${logDir(c.layout)}. Point the E2B SDK at the cluster with:`,
      `export E2B_API_URL=${apiUrl} E2B_SANDBOX_URL=${apiUrl} E2B_API_KEY=${c.layout.apiKey}`,
      'Ctrl-C stops everything (running sandboxes are paused first).',
      '',
    ].join('\n'),
  );
  const gone = await Promise.race(c.running().map((p) => p.exited.then(() => p)));
  if (stopping) return;
  console.error(`cluster: ${gone.name} exited (code ${gone.child.exitCode}); stopping the rest`);
  await shutdown();
}

let stopping: Promise<void> | undefined;
function shutdown(): Promise<void> {
  stopping ??= (async () => {
    await cluster?.stop();
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
  await cluster?.stop();
  process.exit(1);
});
