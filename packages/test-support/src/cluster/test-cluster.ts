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
export const SNAPSHOT_STORE = `${HOME}/snapshot-store`;

export interface ClusterOptions {
  nodes: number;
  store: 'redis' | 'memory';
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
  scheduler?: Proc;
  gateway?: Proc;
  readonly nodes: (Proc | undefined)[] = [];
  readonly gatewayUrl: string;

  private constructor(readonly o: ClusterOptions) {
    this.gatewayUrl = `http://${o.gatewayAddr ?? `127.0.0.1:${GATEWAY_PORT}`}`;
  }

  static async start(o: ClusterOptions): Promise<TestCluster> {
    const c = new TestCluster(o);
    try {
      rmSync(SNAPSHOT_STORE, { recursive: true, force: true });
      if (o.store === 'redis') await c.startRedis();
      await c.startScheduler();
      await c.startGateway();
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

  private async startRedis(): Promise<void> {
    const dir = `${HOME}/redis`;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    this.redis = spawnProc(
      'redis',
      'redis-server',
      ['--port', String(REDIS_PORT), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
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

  async startScheduler(): Promise<void> {
    const store = this.o.store === 'redis' ? `redis://127.0.0.1:${REDIS_PORT}` : 'memory';
    this.scheduler = await startHealthy(
      'scheduler',
      process.execPath,
      [SCHEDULER_BIN],
      {
        SCHEDULER_ADDR: `127.0.0.1:${SCHEDULER_PORT}`,
        AENV_SCHEDULER_STORE: store,
        AENV_API_KEY: API_KEY,
        // Every node reports this whole 2-core machine as its own: allow the suites' 20 per node.
        AENV_SCHEDULER_CPU_OVERCOMMIT: '64',
        AENV_LOG_LEVEL: process.env.AENV_TEST_LOG_LEVEL ?? 'warn',
      },
      `http://127.0.0.1:${SCHEDULER_PORT}/health`,
    );
  }

  async stopScheduler(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.scheduler?.stop(signal);
    this.scheduler = undefined;
  }

  private async startGateway(): Promise<void> {
    const addr = this.o.gatewayAddr ?? `127.0.0.1:${GATEWAY_PORT}`;
    this.gateway = await startHealthy(
      'gateway',
      process.execPath,
      [GATEWAY_BIN],
      {
        GATEWAY_ADDR: addr,
        AENV_SCHEDULER_URL: `http://127.0.0.1:${SCHEDULER_PORT}`,
        AENV_API_KEY: API_KEY,
        AENV_SANDBOX_PROXY_DOMAINS: DOMAIN,
        AENV_LOG_LEVEL: process.env.AENV_TEST_LOG_LEVEL ?? 'warn',
        ...this.o.gatewayEnv,
      },
      this.o.gatewayHealth?.url ?? `http://${addr}/health`,
      this.o.gatewayHealth ?? {},
    );
  }

  async startNode(i: number): Promise<void> {
    this.nodes[i] = await startNode({
      name: `n${i}`,
      addr: `127.0.0.1:${19910 + i}`,
      hostRange: `10.119.${i * 32}.0/19`,
      env: {
        AENV_SCHEDULER_URL: `http://127.0.0.1:${SCHEDULER_PORT}`,
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

  /** A control call through the gateway with the cluster's key. */
  async api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const r = await fetch(`${this.gatewayUrl}${path}`, {
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

  /** Waits until the scheduler has `count` ready nodes (asked directly: the gateway may be TLS). */
  async waitReady(count: number, timeoutMs = 60_000): Promise<void> {
    const scheduler = createSchedulerClient({ url: `http://127.0.0.1:${SCHEDULER_PORT}`, apiKey: API_KEY });
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
    await this.gateway?.stop();
    await Promise.all(this.nodes.map((_, i) => this.stopNode(i)));
    await this.scheduler?.stop();
    await this.redis?.stop();
    removeCgroups('aenv-h9');
  }
}
