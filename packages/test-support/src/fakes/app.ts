import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { Limiter } from '@agentenv/common';
import { BuildFiles, BuiltTemplates, VolumeStore } from '@agentenv/node';
import { RuntimeCache, SnapshotStore } from '@agentenv/snapshot';
import { buildApp, MetricsHistory, NodeMetrics, SandboxEventLog, SandboxProxy } from '@agentenv/node/server';
import { FakeNode, type FakeNodeOptions } from './node.js';
import { MemoryObjectRepository } from './repository.js';

export const FAKE_API_KEY = 'e2b_0123456789abcdef';

export type FakeApp = Awaited<ReturnType<typeof buildApp>>;

type DashboardDeps = NonNullable<Parameters<typeof buildApp>[0]['dashboard']>;

export interface FakeAppOptions {
  /** Serve the dashboard too, with this activity (its catalogue is the app's in-memory store). */
  dashboardActivity?: DashboardDeps['activity'];
}

/**
 * The node's real Fastify app (routes, auth, error mapping, metrics) over a FakeNode, for
 * `app.inject()`. Built templates live in an in-memory repository (builds themselves are not
 * faked: a trigger fails its build). `close()` also removes the scratch directory.
 */
export async function fakeApp(
  node: FakeNode,
  options: FakeAppOptions = {},
): Promise<{ app: FakeApp; proxy: SandboxProxy; close: () => Promise<void> }> {
  const scratch = await mkdtemp(join(tmpdir(), 'aenv-fake-app-'));
  const store = new SnapshotStore({ repository: new MemoryObjectRepository() });
  const cache = new RuntimeCache({ dir: join(scratch, 'cache'), capacityBytes: 2 ** 30, store });
  await cache.open();
  const built = new BuiltTemplates({
    store,
    cache,
    runner: {
      run: async () => {
        throw new Error('template builds are not faked');
      },
    },
    queue: new Limiter(1),
    envdVersion: '0.6.4',
    logger: node.logger,
  });
  const proxy = new SandboxProxy(node.orchestrator, node.logger);
  node.orchestrator.beforeCapture((id, why) => proxy.drain(id, why));
  const metrics = new NodeMetrics({
    sandboxCounts: () => node.orchestrator.counts(),
    poolSizes: () => node.pool.sizes(),
  });
  node.observe(metrics);
  const events = new SandboxEventLog(node.config.nodeIdentity.nodeId);
  node.observe(events.observer);
  const app = await buildApp({
    config: node.config,
    apiKey: FAKE_API_KEY,
    orchestrator: node.orchestrator,
    snapshots: node.snapshots,
    templates: { built, files: new BuildFiles(join(scratch, 'files')) },
    proxy,
    metrics,
    events,
    usage: { history: new MetricsHistory(720), sampleNow: (id) => node.orchestrator.usage(id) },
    logger: node.logger,
    version: '0.0.0-fake',
    volumes: new VolumeStore(join(scratch, 'volumes')),
    ...(options.dashboardActivity
      ? { dashboard: { activity: options.dashboardActivity, store, cache } }
      : {}),
  });
  await app.ready();
  return {
    app,
    proxy,
    close: async () => {
      await app.close();
      proxy.close();
      await rm(scratch, { recursive: true, force: true });
    },
  };
}

export type FakeAppMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

/**
 * One FakeNode and its app for the enclosing describe block (or file): building an app takes a
 * while, so tests share it, and after each test the node's faults are cleared and every sandbox
 * it holds is killed. `node` and `app` are set before the first test; `call` sends an
 * authenticated request and returns its status, headers and JSON body.
 */
export function useFakeApp(options: FakeNodeOptions = {}) {
  const ctx = {} as { node: FakeNode; app: FakeApp };
  let close: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    ctx.node = new FakeNode(options);
    ({ app: ctx.app, close } = await fakeApp(ctx.node));
  });
  afterAll(() => close?.());
  afterEach(async () => {
    ctx.node.driver.faults.clear();
    for (const r of ctx.node.orchestrator.list()) await ctx.node.orchestrator.kill(r.sandboxId);
  });
  const call = async (method: FakeAppMethod, url: string, payload?: unknown) => {
    const r = await ctx.app.inject({
      method,
      url,
      headers: { 'x-api-key': FAKE_API_KEY },
      ...(payload !== undefined ? { payload: payload as object } : {}),
    });
    return { status: r.statusCode, headers: r.headers, json: r.body ? r.json() : undefined };
  };
  return Object.assign(ctx, { call });
}
