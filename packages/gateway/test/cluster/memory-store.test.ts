import { Sandbox, Volume } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { TEST_CLUSTER_KEY, TestCluster } from '@agentenv/test-support/cluster';
import { useGateway } from './sdk-env.js';

/** One 2-node cluster on the scheduler's memory store for the file; its scheduler restarts last. */
let c: TestCluster;

beforeAll(async () => {
  c = await TestCluster.start({ nodes: 2, store: 'memory' });
  useGateway(c.gatewayUrl);
});

afterAll(async () => {
  await c?.stop();
});

/**
 * Each node with its own volumes (no shared volume root): the gateway finds the node that holds
 * a volume for its calls, and places a sandbox that mounts it there.
 */
describe('volumes through the gateway, each node holding its own', () => {
  const run = Date.now().toString(36);

  /** A volume made on node `i` itself. */
  async function volumeOn(i: number, name: string): Promise<Volume> {
    const r = await fetch(`${c.nodeUrl(i)}/volumes`, {
      method: 'POST',
      headers: { 'x-api-key': TEST_CLUSTER_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `${name}-${run}` }),
    });
    expect(r.status).toBe(201);
    const v = (await r.json()) as { volumeID: string; name: string; token: string };
    return new Volume(v.volumeID, v.name, v.token);
  }

  it('reach the node that holds each volume, and a sandbox mounting one is placed there', async () => {
    const [a, b] = [await volumeOn(0, 'on-a'), await volumeOn(1, 'on-b')];
    const listed = (await Volume.list()).map((v) => v.name);
    expect(listed).toEqual(expect.arrayContaining([a.name, b.name]));
    expect((await Volume.getInfo(b.volumeId)).name).toBe(b.name);

    // The content API through the gateway, with each volume's own token.
    await b.writeFile('/seed.txt', 'on node 1');
    expect(await b.readFile('/seed.txt')).toBe('on node 1');
    await expect(new Volume(b.volumeId, b.name, 'forged').list('/')).rejects.toThrow();

    const sbx = await Sandbox.create({ volumeMounts: { '/data': b } });
    try {
      expect((await c.placementOf()).get(sbx.sandboxId)).toBe(1);
      expect((await sbx.commands.run('cat /data/seed.txt')).stdout).toBe('on node 1');
      await sbx.commands.run('echo from-sandbox > /data/out.txt');
      expect(await b.readFile('/out.txt')).toBe('from-sandbox\n');
    } finally {
      await sbx.kill();
    }

    // Volumes of two nodes, or of none, cannot be mounted together: the refusal says why.
    const both = await c.api('POST', '/sandboxes', {
      templateID: 'base',
      volumeMounts: [
        { name: a.name, path: '/a' },
        { name: b.name, path: '/b' },
      ],
    });
    expect(both.status).toBe(400);
    expect((both.json as { message: string }).message).toContain('no node holds all of these volumes');
    const none = await c.api('POST', '/sandboxes', {
      templateID: 'base',
      volumeMounts: [{ name: `missing-${run}`, path: '/m' }],
    });
    expect(none.status).toBe(400);
    expect((none.json as { message: string }).message).toBe(`volume missing-${run} not found on any node`);

    expect(await Volume.destroy(a.volumeId)).toBe(true);
    expect(await Volume.destroy(b.volumeId)).toBe(true);
    expect((await Volume.list()).map((v) => v.name)).not.toContain(a.name);
  });
});

describe('scheduler restart with the memory store', () => {
  const HEARTBEAT_MS = 2_000;

  it('has sandboxes routable again within one heartbeat, from the nodes rosters', async () => {
    const sbx = await Sandbox.create();
    await c.stopScheduler('SIGKILL');
    await c.startScheduler();
    const t0 = Date.now();
    // One heartbeat interval, plus a second for the heartbeat itself on a loaded machine.
    await eventually(
      async () => expect((await c.api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(200),
      {
        timeoutMs: HEARTBEAT_MS + 1_000,
        intervalMs: 50,
      },
    );
    console.log(`memory store: routable ${Date.now() - t0} ms after the scheduler answered again`);
    expect((await sbx.commands.run('echo back')).stdout).toBe('back\n');
    await sbx.kill();
  });
});
