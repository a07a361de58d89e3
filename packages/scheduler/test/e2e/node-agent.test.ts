import { rmSync } from 'node:fs';
import { NodeStatus, SandboxEventType, SandboxState } from '@agentenv/protocol/scheduler';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { startSchedulerProcess, type SchedulerProcess } from '@agentenv/test-support/cluster';
import {
  API_KEY,
  homeOf,
  nearInstance,
  startServer,
  urlOf,
  type TestServer,
} from '@agentenv/test-support/server';
import { createSchedulerClient } from '../../src/client.js';

// Test-node instances no other test uses, and a scheduler port of helper range 192xx.
const A = nearInstance(6);
const B = nearInstance(7);
const SCHEDULER_PORT = 19220;
const STORE = `${homeOf(A)}/snapshot-store`;

const call = async (instance: number, method: string, path: string, body?: unknown) => {
  const r = await fetch(`${urlOf(instance)}${path}`, {
    method,
    headers: { 'x-api-key': API_KEY, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : undefined };
};

describe('a node in a cluster', () => {
  let scheduler: SchedulerProcess;
  let a: TestServer;
  let b: TestServer;
  const client = () => createSchedulerClient({ url: scheduler.url, apiKey: API_KEY });
  const nodeEnv = (id: string) => ({
    AENV_SCHEDULER_URL: scheduler.url,
    AENV_NODE_ID: id,
    AENV_POOL_SIZE: '0',
    AENV_SNAPSHOT_STORE: STORE,
  });

  beforeAll(async () => {
    scheduler = await startSchedulerProcess({
      port: SCHEDULER_PORT,
      apiKey: API_KEY,
      heartbeatIntervalMs: 500,
    });
    a = await startServer(nodeEnv('h2-node-a'), A);
    b = await startServer(nodeEnv('h2-node-b'), B);
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await scheduler?.stop();
    for (const i of [A, B]) rmSync(homeOf(i), { recursive: true, force: true });
  });

  it('registers by heartbeat, its roster and events reach the scheduler, and SIGTERM drains it before pausing', async () => {
    const c = client();
    await eventually(async () => expect((await c.listNodes({})).nodes).toHaveLength(2), {
      timeoutMs: 30_000,
    });
    const nodes = (await c.listNodes({})).nodes;
    expect(nodes.map((n) => [n.ref?.nodeId, n.ref?.advertiseUrl, n.status])).toEqual([
      ['h2-node-a', urlOf(A), NodeStatus.READY],
      ['h2-node-b', urlOf(B), NodeStatus.READY],
    ]);
    expect(nodes[0]!.capacity?.maxSandboxes).toBe(1000);

    const created = await call(A, 'POST', '/sandboxes', { templateID: 'base', timeout: 600 });
    expect(created.status).toBe(201);
    const id = created.json.sandboxID as string;
    // In node A's roster once its next heartbeat has gone.
    await eventually(async () =>
      expect((await c.lookupNode({ sandboxId: id })).sandbox?.state).toBe(SandboxState.RUNNING),
    );
    expect((await c.lookupNode({ sandboxId: id })).node?.nodeId).toBe('h2-node-a');
    const roster = (await c.getNode({ nodeId: 'h2-node-a' })).node?.sandboxes;
    expect(roster?.map((s) => [s.sandboxId, s.templateId])).toEqual([[id, 'base']]);

    expect((await call(A, 'POST', `/sandboxes/${id}/pause`)).status).toBe(204);
    expect((await call(A, 'POST', `/sandboxes/${id}/connect`, { timeout: 600 })).status).toBe(201);
    const local = await call(A, 'GET', `/sandboxes/${id}/events`);
    expect(local.status).toBe(200);
    expect(local.json.map((e: { type: string }) => e.type)).toEqual(['created', 'paused', 'resumed']);
    expect(local.json[0]).toMatchObject({
      sandboxID: id,
      nodeID: 'h2-node-a',
      details: { template_id: 'base' },
    });
    expect((await call(A, 'GET', '/sandboxes/nope/events')).status).toBe(404);
    await eventually(async () =>
      expect((await c.listSandboxEvents({ sandboxId: id })).events).toHaveLength(3),
    );

    // SIGTERM: the node must be draining at the scheduler before its sandboxes are paused.
    const watcher = createSchedulerClient({ url: scheduler.url, apiKey: API_KEY, timeoutMs: 0 });
    const ac = new AbortController();
    let statusWhenPaused: NodeStatus | undefined;
    const watching = (async () => {
      for await (const m of watcher.watchEvents({ sandboxId: id }, { signal: ac.signal })) {
        if (m.event?.type !== SandboxEventType.PAUSED) continue;
        statusWhenPaused = (await c.getNode({ nodeId: 'h2-node-a' })).node?.status;
        ac.abort();
      }
    })().catch(() => undefined);
    await a.stop('SIGTERM');
    await eventually(() => expect(statusWhenPaused).toBeDefined());
    await watching;
    expect(statusWhenPaused).toBe(NodeStatus.DRAINING);
    // Its last heartbeat says the sandbox is paused; once silent, the node is unhealthy and the
    // paused sandbox is not lost.
    expect((await c.lookupNode({ sandboxId: id })).sandbox).toMatchObject({ state: SandboxState.PAUSED });
    await eventually(async () =>
      expect((await c.getNode({ nodeId: 'h2-node-a' })).node?.status).toBe(NodeStatus.UNHEALTHY),
    );
    expect((await c.lookupNode({ sandboxId: id })).sandbox?.state).toBe(SandboxState.PAUSED);

    // Resumed on node B from the shared repository; B's roster rebinds it.
    expect((await call(B, 'POST', `/sandboxes/${id}/connect`, { timeout: 600 })).status).toBe(201);
    await eventually(async () => {
      const l = await c.lookupNode({ sandboxId: id });
      expect([l.node?.nodeId, l.sandbox?.state]).toEqual(['h2-node-b', SandboxState.RUNNING]);
    });
    const events = (await c.listSandboxEvents({ sandboxId: id })).events;
    expect(events.map((e) => [SandboxEventType[e.type], e.nodeId])).toEqual([
      ['CREATED', 'h2-node-a'],
      ['PAUSED', 'h2-node-a'],
      ['RESUMED', 'h2-node-a'],
      ['PAUSED', 'h2-node-a'],
      ['RESUMED', 'h2-node-b'],
    ]);
    expect((await call(B, 'DELETE', `/sandboxes/${id}`)).status).toBe(204);
    await eventually(() =>
      expect(c.lookupNode({ sandboxId: id })).rejects.toThrow(/not known to the scheduler/),
    );
  });
});
