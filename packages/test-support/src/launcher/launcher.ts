import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { packageDir, REPO_ROOT } from '../paths.js';
import { logDir, snapshotStore, type ClusterLayout, type NodePlace } from './layout.js';
import { spawnProc, statusOf, untilPartReady, type HealthCheck, type Proc } from './part.js';
import { aofRedisArgs, pingRedis } from './redis.js';

const NODE_BIN = path.join(packageDir('@agentenv/node'), 'bin', 'aenv-server.js');
const SCHEDULER_BIN = path.join(packageDir('@agentenv/scheduler'), 'bin', 'aenv-scheduler.js');
/** The gateway comes after this package in the build, so it is found by its place in the tree. */
export const GATEWAY_BIN = `${REPO_ROOT}packages/gateway/bin/aenv-gateway.js`;

const SERVICE_READY_MS = 60_000;
/** A node is ready once its base template exists: built, on a machine without the cached one. */
const NODE_READY_MS = 120_000;

export interface LaunchOptions {
  /** Schedulers and gateways (as many of each), on one store; every node and gateway knows all schedulers. */
  replicas: number;
  store: 'redis' | 'memory';
  /** Parts in process groups of their own (see SpawnOptions.detached). */
  detached?: boolean;
  /** Added to every node's and every gateway's environment. */
  nodeEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  /** How to reach the first gateway's /health, when not over plain HTTP at its address (TLS). */
  gatewayHealth?: HealthCheck;
}

const answers204 = (h: HealthCheck) => async () => (await statusOf(h)) === 204;

/** Environment variables, leaving out those a layout does not set. */
const setOnly = (vars: Record<string, string | number | undefined>): Record<string, string> =>
  Object.fromEntries(Object.entries(vars).flatMap(([k, v]) => (v === undefined ? [] : [[k, String(v)]])));

/** The environment every part of a layout shares. */
const levelEnv = (layout: ClusterLayout) => setOnly({ AENV_LOG_LEVEL: layout.logLevel });
/** …and what nodes and gateways share: where sandboxes are served. */
const edgeEnv = (layout: ClusterLayout) =>
  setOnly({ AENV_LOG_LEVEL: layout.logLevel, AENV_SANDBOX_PROXY_DOMAINS: layout.sandboxDomain });

/** A node's home, borrowing the shared base template and image layers instead of building its own. */
function nodeHome(layout: ClusterLayout, place: NodePlace): string {
  mkdirSync(place.home, { recursive: true });
  for (const shared of ['layers', 'templates']) {
    mkdirSync(path.join(layout.sharedCache, shared), { recursive: true });
    if (!existsSync(path.join(place.home, shared)))
      symlinkSync(path.join(layout.sharedCache, shared), path.join(place.home, shared));
  }
  return place.home;
}

/** Starts `aenv-server` at `place` with the layout's key, domain and pool (not yet ready: see launchNode). */
function spawnNode(
  layout: ClusterLayout,
  place: NodePlace,
  env: Record<string, string>,
  detached?: boolean,
): Proc {
  const nodeEnv = {
    API_ADDR: place.addr,
    AENV_HOME_PATH: nodeHome(layout, place),
    AENV_RUNTIME_PATH: place.runtimeDir,
    AENV_API_KEY: layout.apiKey,
    AENV_NETWORK_NODE_TAG: place.tag,
    AENV_NETWORK_HOST_RANGE: place.hostRange,
    AENV_POOL_SIZE: String(layout.poolSize),
    ...setOnly({ AENV_MAX_SANDBOXES: layout.maxSandboxesPerNode }),
    ...edgeEnv(layout),
    ...env,
  };
  return spawnProc(place.name, process.execPath, [NODE_BIN], nodeEnv, { logDir: logDir(layout), detached });
}

/** A node of `layout` on its own (no scheduler), ready once `health` answers 204. */
export function launchNode(
  layout: ClusterLayout,
  place: NodePlace,
  o: { env?: Record<string, string>; health?: HealthCheck } = {},
): Promise<Proc> {
  const p = spawnNode(layout, place, o.env ?? {});
  return untilPartReady(p, answers204(o.health ?? { url: `http://${place.addr}/health` }), NODE_READY_MS);
}

/** `scheduler`, `scheduler2`, …: replica k's name. */
const replicaName = (part: string, k: number) => (k ? `${part}${k + 1}` : part);

/**
 * The parts of a cluster laid out by a ClusterLayout: redis-server on an append-only file (or the
 * memory store), schedulers, gateways and nodes on one shared posix_fs repository, each started
 * (and waited for) or stopped on its own, and all stopped in order.
 */
export class ClusterLauncher {
  redis?: Proc;
  readonly schedulers: (Proc | undefined)[] = [];
  readonly gateways: (Proc | undefined)[] = [];
  readonly nodes: (Proc | undefined)[] = [];
  readonly schedulerUrls: string[];
  /** Each gateway's URL. */
  readonly gatewayUrls: string[];

  constructor(
    readonly layout: ClusterLayout,
    readonly launch: LaunchOptions,
  ) {
    const replicas = Array.from({ length: launch.replicas }, (_, k) => k);
    this.schedulerUrls = replicas.map((k) => `http://${layout.schedulerAddr(k)}`);
    this.gatewayUrls = replicas.map((k) => `http://${layout.gatewayAddr(k)}`);
  }

  /** What nodes and gateways are given as AENV_SCHEDULER_URL: every replica, tried in turn. */
  get schedulerList(): string {
    return this.schedulerUrls.join(',');
  }

  /** The schedulers' AENV_SCHEDULER_STORE. */
  get store(): string {
    return this.launch.store === 'redis' ? `redis://127.0.0.1:${this.layout.redisPort}` : 'memory';
  }

  nodeUrl = (k: number): string => `http://${this.layout.node(k).addr}`;

  /** Every part that was started and not stopped. */
  running(): Proc[] {
    return [this.redis, ...this.schedulers, ...this.nodes, ...this.gateways].filter((p) => p !== undefined);
  }

  /** redis-server on the append-only file in `<home>/redis`, an empty one when `fresh`. */
  async startRedis({ fresh = false } = {}): Promise<void> {
    const dir = `${this.layout.home}/redis`;
    if (fresh) rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const port = this.layout.redisPort;
    this.redis = this.spawn('redis', 'redis-server', aofRedisArgs(port, dir), {});
    await this.ready(
      () => (this.redis = undefined),
      this.redis,
      () => pingRedis(port),
      SERVICE_READY_MS,
    );
  }

  async stopRedis(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.redis?.stop(signal);
    this.redis = undefined;
  }

  async startScheduler(k = 0): Promise<void> {
    const p = this.spawn(replicaName('scheduler', k), process.execPath, [SCHEDULER_BIN], {
      SCHEDULER_ADDR: this.layout.schedulerAddr(k),
      AENV_SCHEDULER_STORE: this.store,
      AENV_API_KEY: this.layout.apiKey,
      ...setOnly({ AENV_SCHEDULER_CPU_OVERCOMMIT: this.layout.cpuOvercommit }),
      ...levelEnv(this.layout),
    });
    this.schedulers[k] = p;
    const health = { url: `${this.schedulerUrls[k]}/health` };
    await this.ready(() => (this.schedulers[k] = undefined), p, answers204(health), SERVICE_READY_MS);
  }

  async stopScheduler(signal: NodeJS.Signals = 'SIGKILL', k = 0): Promise<void> {
    await this.schedulers[k]?.stop(signal);
    this.schedulers[k] = undefined;
  }

  async startGateway(k = 0): Promise<void> {
    const p = this.spawn(replicaName('gateway', k), process.execPath, [GATEWAY_BIN], {
      GATEWAY_ADDR: this.layout.gatewayAddr(k),
      AENV_SCHEDULER_URL: this.schedulerList,
      AENV_API_KEY: this.layout.apiKey,
      ...edgeEnv(this.layout),
      ...this.launch.gatewayEnv,
    });
    this.gateways[k] = p;
    const health = (!k && this.launch.gatewayHealth) || { url: `${this.gatewayUrls[k]}/health` };
    await this.ready(() => (this.gateways[k] = undefined), p, answers204(health), SERVICE_READY_MS);
  }

  async stopGateway(k = 0, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.gateways[k]?.stop(signal);
    this.gateways[k] = undefined;
  }

  /** Node k, joined to every scheduler, its pauses in the shared repository. */
  async startNode(k: number): Promise<void> {
    const place = this.layout.node(k);
    const p = spawnNode(
      this.layout,
      place,
      {
        AENV_SCHEDULER_URL: this.schedulerList,
        AENV_ADVERTISE_URL: this.nodeUrl(k),
        AENV_NODE_ID: place.id,
        AENV_SNAPSHOT_STORE: snapshotStore(this.layout),
        ...this.launch.nodeEnv,
      },
      this.launch.detached,
    );
    this.nodes[k] = p;
    const health = { url: `${this.nodeUrl(k)}/health` };
    await this.ready(() => (this.nodes[k] = undefined), p, answers204(health), NODE_READY_MS);
  }

  async stopNode(k: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.nodes[k]?.stop(signal);
    this.nodes[k] = undefined;
  }

  /**
   * The gateways first (a node's clean stop waits for the requests in flight to it, and the
   * gateways' are over once they are gone), then the nodes together (each drains at the scheduler
   * and pauses its sandboxes, so the schedulers must still run), then the schedulers and Redis.
   */
  async stop(): Promise<void> {
    const stopAll = async (parts: (Proc | undefined)[]) => {
      await Promise.all(parts.map((p) => p?.stop()));
      parts.fill(undefined);
    };
    await stopAll(this.gateways);
    await stopAll(this.nodes);
    await stopAll(this.schedulers);
    await this.stopRedis('SIGTERM');
  }

  private spawn(name: string, cmd: string, args: string[], env: Record<string, string>): Proc {
    return spawnProc(name, cmd, args, env, { logDir: logDir(this.layout), detached: this.launch.detached });
  }

  /** Waits for a part that is already listed (so a stop meanwhile stops it), unlisting it if it fails. */
  private async ready(
    unlist: () => void,
    p: Proc,
    ok: () => Promise<boolean>,
    timeoutMs: number,
  ): Promise<void> {
    await untilPartReady(p, ok, timeoutMs).catch((err: unknown) => {
      unlist();
      throw err;
    });
  }
}
