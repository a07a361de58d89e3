import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { NodeStatus } from '@agentenv/protocol/scheduler';
import { createSchedulerClient } from '@agentenv/scheduler';
import { eventually } from '../eventually.js';
import { packageDir, REPO_ROOT } from '../paths.js';
import {
  startNode,
  TEST_CLUSTER_DOMAIN as DOMAIN,
  TEST_CLUSTER_HOME as HOME,
  TEST_CLUSTER_KEY as API_KEY,
} from './nodes.js';
import { removeCgroups, spawnProc, startHealthy, type Proc } from './processes.js';

const SCHEDULER_BIN = path.join(packageDir('@agentenv/scheduler'), 'bin', 'aenv-scheduler.js');
// The gateway comes after this package in the build, so it is found by its place in the tree.
const GATEWAY_BIN = `${REPO_ROOT}packages/gateway/bin/aenv-gateway.js`;

export const GATEWAY_PORT = 19900;
const SCHEDULER_PORT = 19901;
const REDIS_PORT = 19902;
/** Replica k > 0 of the gateway and of the scheduler listens at these plus k. */
const GATEWAY_REPLICA_PORT = 19902;
const SCHEDULER_REPLICA_PORT = 19904;
const MAX_REPLICAS = 2;
export const SNAPSHOT_STORE = `${HOME}/snapshot-store`;

export interface ClusterOptions {
  nodes: number;
  store: 'redis' | 'memory';
  /** Gateways and schedulers (1 or 2 of each, on one store); every node and gateway knows all schedulers. */
  replicas?: number;
  nodeEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  /** Where the gateway listens and how to reach its /health (TLS). */
  gatewayAddr?: string;
  gatewayHealth?: { url: string; ca?: string; servername?: string };
}

/** What the gateway says of one node (GET /nodes). */
export interface NodeView {
  nodeID: string;
  status: string;
  sandboxCount: number;
  pausedSandboxCount: number;
}

/**
 * A real cluster on this machine: redis-server (or the memory store), aenv-scheduler,
 * aenv-gateway and N aenv-server nodes on one shared posix_fs repository, each node with its
 * own port, home, network tag and host range.
 */
export class TestCluster {
  redis?: Proc;
  readonly schedulers: (Proc | undefined)[] = [];
  readonly gateways: (Proc | undefined)[] = [];
  readonly nodes: (Proc | undefined)[] = [];
  /** Each gateway's URL, the first at `gatewayUrl`. */
  readonly gatewayUrls: string[];
  private readonly schedulerUrls: string[];

  private constructor(readonly o: ClusterOptions) {
    const replicas = o.replicas ?? 1;
    if (replicas < 1 || replicas > MAX_REPLICAS) throw new Error(`replicas must be 1 to ${MAX_REPLICAS}`);
    const replica = (k: number, first: string, port: number) => (k ? `127.0.0.1:${port + k}` : first);
    this.gatewayUrls = Array.from(
      { length: replicas },
      (_, k) => `http://${replica(k, o.gatewayAddr ?? `127.0.0.1:${GATEWAY_PORT}`, GATEWAY_REPLICA_PORT)}`,
    );
    this.schedulerUrls = Array.from(
      { length: replicas },
      (_, k) => `http://${replica(k, `127.0.0.1:${SCHEDULER_PORT}`, SCHEDULER_REPLICA_PORT)}`,
    );
  }

  get gatewayUrl(): string {
    return this.gatewayUrls[0]!;
  }
  get scheduler(): Proc | undefined {
    return this.schedulers[0];
  }
  get gateway(): Proc | undefined {
    return this.gateways[0];
  }
  /** What nodes and gateways are given as AENV_SCHEDULER_URL: every replica. */
  private get schedulerList(): string {
    return this.schedulerUrls.join(',');
  }

  static async start(o: ClusterOptions): Promise<TestCluster> {
    const c = new TestCluster(o);
    try {
      rmSync(SNAPSHOT_STORE, { recursive: true, force: true });
      if (o.store === 'redis') await c.startRedis();
      for (let k = 0; k < c.schedulerUrls.length; k++) await c.startScheduler(k);
      for (let k = 0; k < c.gatewayUrls.length; k++) await c.startGateway(k);
      await Promise.all(Array.from({ length: o.nodes }, (_, i) => c.startNode(i)));
      // Nodes join once `base` exists: on a machine without the cached template, after building it.
      await c.waitReady(o.nodes, 900_000);
    } catch (err) {
      await c.stop();
      throw err;
    }
    return c;
  }

  static nodeId = (i: number) => `h9n${i}`;
  nodeUrl = (i: number) => `http://127.0.0.1:${19910 + i}`;

  /** redis-server with an append-only file (synced every second), as a cluster should run it. */
  private async startRedis(): Promise<void> {
    const dir = `${HOME}/redis`;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    await this.spawnRedis(dir);
  }

  /** Stops redis-server (SIGKILL: a crash) and starts it again on its append-only file. */
  async restartRedis(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.stopRedis(signal);
    await this.startRedisAgain();
  }

  async stopRedis(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.redis?.stop(signal);
    this.redis = undefined;
  }

  /** redis-server again, on the append-only file it left. */
  startRedisAgain(): Promise<void> {
    return this.spawnRedis(`${HOME}/redis`);
  }

  private async spawnRedis(dir: string): Promise<void> {
    this.redis = spawnProc(
      'redis',
      'redis-server',
      [
        ...['--port', String(REDIS_PORT), '--bind', '127.0.0.1', '--dir', dir],
        ...['--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec'],
      ],
      {},
    );
    await eventually(
      () => {
        if (!/Ready to accept connections/.test(this.redis!.output()))
          throw new Error(`redis-server did not start:\n${this.redis!.output()}`);
      },
      { timeoutMs: 20_000 },
    );
  }

  async startScheduler(k = 0): Promise<void> {
    const store = this.o.store === 'redis' ? `redis://127.0.0.1:${REDIS_PORT}` : 'memory';
    const url = this.schedulerUrls[k]!;
    this.schedulers[k] = await startHealthy(
      k ? `scheduler${k}` : 'scheduler',
      process.execPath,
      [SCHEDULER_BIN],
      {
        SCHEDULER_ADDR: new URL(url).host,
        AENV_SCHEDULER_STORE: store,
        AENV_API_KEY: API_KEY,
        // Every node reports this whole 2-core machine as its own: allow the suites' 20 per node.
        AENV_SCHEDULER_CPU_OVERCOMMIT: '64',
        AENV_LOG_LEVEL: process.env.AENV_TEST_LOG_LEVEL ?? 'warn',
      },
      `${url}/health`,
    );
  }

  async stopScheduler(signal: NodeJS.Signals = 'SIGKILL', k = 0): Promise<void> {
    await this.schedulers[k]?.stop(signal);
    this.schedulers[k] = undefined;
  }

  async startGateway(k = 0): Promise<void> {
    const addr = new URL(this.gatewayUrls[k]!).host;
    this.gateways[k] = await startHealthy(
      k ? `gateway${k}` : 'gateway',
      process.execPath,
      [GATEWAY_BIN],
      {
        GATEWAY_ADDR: addr,
        AENV_SCHEDULER_URL: this.schedulerList,
        AENV_API_KEY: API_KEY,
        AENV_SANDBOX_PROXY_DOMAINS: DOMAIN,
        AENV_LOG_LEVEL: process.env.AENV_TEST_LOG_LEVEL ?? 'warn',
        ...this.o.gatewayEnv,
      },
      (!k && this.o.gatewayHealth?.url) || `http://${addr}/health`,
      (!k && this.o.gatewayHealth) || {},
    );
  }

  async stopGateway(k = 0, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.gateways[k]?.stop(signal);
    this.gateways[k] = undefined;
  }

  async startNode(i: number): Promise<void> {
    this.nodes[i] = await startNode({
      name: `n${i}`,
      addr: `127.0.0.1:${19910 + i}`,
      hostRange: `10.119.${i * 32}.0/19`,
      env: {
        AENV_SCHEDULER_URL: this.schedulerList,
        AENV_ADVERTISE_URL: this.nodeUrl(i),
        AENV_NODE_ID: TestCluster.nodeId(i),
        AENV_SNAPSHOT_STORE: SNAPSHOT_STORE,
        ...this.o.nodeEnv,
      },
    });
  }

  async stopNode(i: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.nodes[i]?.stop(signal);
    this.nodes[i] = undefined;
  }

  /** A control call through the (first) gateway with the cluster's key. */
  api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    return this.apiAt(this.gatewayUrl, method, path, body, headers);
  }

  /** A control call to `base` (a gateway or a node) with the cluster's key. */
  async apiAt(
    base: string,
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: {
        'x-api-key': API_KEY,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = text;
    }
    return { status: r.status, headers: r.headers, json: json as Record<string, unknown> & unknown[] };
  }

  async nodeViews(): Promise<NodeView[]> {
    const r = await this.api('GET', '/nodes');
    if (r.status !== 200) throw new Error(`GET /nodes: ${r.status} ${JSON.stringify(r.json)}`);
    return r.json as unknown as NodeView[];
  }

  /** Waits until the schedulers have `count` ready nodes (asked directly: the gateway may be TLS). */
  async waitReady(count: number, timeoutMs = 60_000): Promise<void> {
    const scheduler = createSchedulerClient({ url: this.schedulerList, apiKey: API_KEY });
    await eventually(
      async () => {
        const { nodes } = await scheduler.listNodes({});
        if (nodes.filter((n) => n.status === NodeStatus.READY).length < count)
          throw new Error(`${count} ready nodes, have ${nodes.map((n) => `${n.ref?.nodeId}:${n.status}`)}`);
      },
      { timeoutMs, intervalMs: 250 },
    );
  }

  /** The node (index) each sandbox runs on, from the nodes' own listings. */
  async placementOf(): Promise<Map<string, number>> {
    const where = new Map<string, number>();
    await Promise.all(
      this.nodes.map(async (p, i) => {
        if (!p) return;
        for (const s of await this.nodeList(i)) where.set(s.sandboxID, i);
      }),
    );
    return where;
  }

  async nodeList(i: number): Promise<{ sandboxID: string; state: string }[]> {
    const r = await fetch(`${this.nodeUrl(i)}/v2/sandboxes?limit=100`, { headers: { 'x-api-key': API_KEY } });
    return (await r.json()) as { sandboxID: string; state: string }[];
  }

  /** Kills every sandbox on every running node (directly, so nothing is left whatever the gateway does). */
  async killAll(): Promise<void> {
    await Promise.all(
      this.nodes.map(async (p, i) => {
        if (!p) return;
        for (;;) {
          const list = await this.nodeList(i);
          if (!list.length) return;
          await Promise.all(
            list.map((s) =>
              fetch(`${this.nodeUrl(i)}/sandboxes/${s.sandboxID}`, {
                method: 'DELETE',
                headers: { 'x-api-key': API_KEY },
              }).then((r) => r.body?.cancel()),
            ),
          );
        }
      }),
    );
  }

  /**
   * Kills every sandbox, then stops every process (nodes cleanly, so they release everything).
   * The gateway goes first: a node's clean stop waits for the requests in flight to it, and the
   * gateway's are over once it is gone.
   */
  async stop(): Promise<void> {
    await this.killAll().catch(() => undefined);
    await Promise.all(this.gateways.map((g) => g?.stop()));
    await Promise.all(this.nodes.map((_, i) => this.stopNode(i)));
    await Promise.all(this.schedulers.map((s) => s?.stop()));
    await this.redis?.stop();
    removeCgroups('aenv-h9');
  }
}
