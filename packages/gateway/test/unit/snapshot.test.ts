import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { handleSnapshot } from '../../src/handlers/sandbox.js';
import type { Scheduler } from '../../src/scheduler/scheduler.js';
import type { ClientRequest, ClientResponse, NodeAnswer, NodeHttp } from '../../src/upstream/node-http.js';
import { fakeContext } from './fake-context.js';

/** A gateway whose sandbox lives on node a, and a log of what the scheduler and client heard. */
function gateway(nodeAnswer: NodeAnswer, recordFails = false) {
  const log: string[] = [];
  const scheduler: Pick<Scheduler, 'lookupNode' | 'recordSnapshot'> = {
    async lookupNode() {
      return { node: { nodeId: 'a', url: 'http://a', status: 'ready' }, state: 'running' };
    },
    async recordSnapshot(nodeId, snapshotId, names) {
      log.push(`scheduler: ${snapshotId} [${names.join(',')}] on ${nodeId}`);
      if (recordFails) throw new Error('scheduler down');
    },
  };
  const nodes: Pick<NodeHttp, 'call'> = {
    async call(node, call) {
      log.push(`node ${node.nodeId}: ${call.method} ${call.path}`);
      return nodeAnswer;
    },
  };
  const ctx = fakeContext(scheduler, nodes);
  const req = Object.assign(Readable.from([Buffer.from('{"name":"mine"}')]), {
    method: 'POST',
    url: '/sandboxes/s1/snapshots',
    headers: { 'content-type': 'application/json' },
  }) as unknown as ClientRequest;
  const res = {
    writeHead(status: number) {
      log.push(`client: ${status}`);
    },
    end() {},
  } as unknown as ClientResponse;
  return { ctx, req, res, log };
}

const json = (status: number, body: unknown): NodeAnswer => ({
  status,
  headers: { 'content-type': 'application/json' },
  body: Buffer.from(JSON.stringify(body)),
});

describe('a snapshot through the gateway', () => {
  it('waits for the shared repository, then tells the scheduler which node holds it before the client hears of it', async () => {
    const g = gateway(json(201, { snapshotID: 'snap1', names: ['mine'] }));
    await handleSnapshot(g.ctx, g.req, g.res, 's1');
    expect(g.log).toEqual([
      'node a: POST /sandboxes/s1/snapshots?wait=stored',
      'scheduler: snap1 [mine] on a',
      'client: 201',
    ]);
  });

  it('answers the node’s refusal as it is, telling the scheduler nothing', async () => {
    const g = gateway(json(409, { code: 409, message: 'sandbox is paused' }));
    await handleSnapshot(g.ctx, g.req, g.res, 's1');
    expect(g.log).toEqual(['node a: POST /sandboxes/s1/snapshots?wait=stored', 'client: 409']);
  });

  it('still answers the snapshot when the scheduler cannot be told', async () => {
    const g = gateway(json(201, { snapshotID: 'snap1', names: [] }), true);
    await handleSnapshot(g.ctx, g.req, g.res, 's1');
    expect(g.log.at(-1)).toBe('client: 201');
  });
});
