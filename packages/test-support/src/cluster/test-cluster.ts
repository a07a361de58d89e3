import { rmSync } from 'node:fs';
import path from 'node:path';
import { NodeStatus } from '@agentenv/protocol/scheduler';
import { createSchedulerClient } from '@agentenv/scheduler';
import { callApi } from '../api-call.js';
import { eventually } from '../eventually.js';
import { ClusterLauncher, removeCgroups, snapshotStore, type LaunchOptions } from '../launcher/index.js';
import { TEST_CLUSTER_KEY as API_KEY, TEST_CLUSTER_LAYOUT } from './test-layout.js';

export const SNAPSHOT_STORE = snapshotStore(TEST_CLUSTER_LAYOUT);

export interface ClusterOptions extends Omit<LaunchOptions, 'replicas' | 'detached'> {
  nodes: number;
  /** Gateways and schedulers (1 or 2 of each, on one store); every node and gateway knows all schedulers. */
  replicas?: number;
  /** Where the first gateway listens (its /health then at `gatewayHealth`, e.g. over TLS). */
  gatewayAddr?: string;
}

/** What the gateway says of one node (GET /nodes). */
export interface NodeView {
  nodeID: string;
  status: string;
  sandboxCount: number;
  pausedSandboxCount: number;
}

/**
 * A real cluster in the test layout (ports 199xx, state under /var/lib/aenv-h9, tags h9…):
 * redis-server (or the memory store), aenv-scheduler, aenv-gateway and N aenv-server nodes on
 * one shared posix_fs repository, with what tests ask of it through the gateway and the nodes.
 */
export class TestCluster extends ClusterLauncher {
  private constructor(o: ClusterOptions) {
    const layout = o.gatewayAddr
      ? {
          ...TEST_CLUSTER_LAYOUT,
          gatewayAddr: (k: number) => (k ? TEST_CLUSTER_LAYOUT.gatewayAddr(k) : o.gatewayAddr!),
        }
      : TEST_CLUSTER_LAYOUT;
    super(layout, { ...o, replicas: o.replicas ?? 1 });
  }

  /** The first gateway's URL. */
  get gatewayUrl(): string {
    return this.gatewayUrls[0]!;
  }
  get scheduler() {
    return this.schedulers[0];
  }
  get gateway() {
    return this.gateways[0];
  }

  static async start(o: ClusterOptions): Promise<TestCluster> {
    const c = new TestCluster(o);
    try {
      rmSync(SNAPSHOT_STORE, { recursive: true, force: true });
      // A fresh cluster holds no sandboxes: a run stopped before its files cleaned up leaves their
      // records (paused sandboxes) in the nodes' homes, which the nodes would bring back.
      for (let i = 0; i < o.nodes; i++)
        for (const dir of ['state', 'captures'])
          rmSync(path.join(TEST_CLUSTER_LAYOUT.node(i).home, dir), { recursive: true, force: true });
      if (o.store === 'redis') await c.startRedis({ fresh: true });
      await Promise.all(c.schedulerUrls.map((_, k) => c.startScheduler(k)));
      // Gateways and nodes need only the schedulers, not each other: they start side by side.
      await Promise.all([
        ...c.gatewayUrls.map((_, k) => c.startGateway(k)),
        ...Array.from({ length: o.nodes }, (_, i) => c.startNode(i)),
      ]);
      // Nodes join once `base` exists: on a machine without the cached template, after building it.
      await c.waitReady(o.nodes, 900_000);
    } catch (err) {
      await c.stop();
      throw err;
    }
    return c;
  }

  static nodeId = (i: number): string => TEST_CLUSTER_LAYOUT.node(i).id;

  /** Stops redis-server (SIGKILL: a crash) and starts it again on its append-only file. */
  async restartRedis(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.stopRedis(signal);
    await this.startRedisAgain();
  }

  /** redis-server again, on the append-only file it left. */
  startRedisAgain(): Promise<void> {
    return this.startRedis();
  }

  /** A control call through the (first) gateway with the cluster's key. */
  api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    return this.apiAt(this.gatewayUrl, method, path, body, headers);
  }

  /** A control call to `base` (a gateway or a node) with the cluster's key. */
  apiAt(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    return callApi(base, API_KEY, method, path, body, headers);
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

  /** Kills every sandbox, then stops every process (nodes cleanly, so they release everything). */
  override async stop(): Promise<void> {
    await this.killAll().catch(() => undefined);
    await super.stop();
    removeCgroups('aenv-h9');
  }
}
