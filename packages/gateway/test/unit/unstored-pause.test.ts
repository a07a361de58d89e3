import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@agentenv/common';
import { handlePause } from '../../src/handlers/pause.js';
import { handleResume, handleSandboxCall } from '../../src/handlers/sandbox.js';
import type { Binding, NodeStatus, Scheduler } from '../../src/scheduler/scheduler.js';
import type { ClientRequest, ClientResponse, NodeAnswer, NodeHttp } from '../../src/upstream/node-http.js';
import { fakeContext } from './fake-context.js';

/**
 * A gateway whose sandbox s1 is bound to node a as `binding` says, and a log of what the
 * scheduler, the nodes and the client heard. Node a answers `answer`, or is unreachable (502).
 */
function gateway(binding: Omit<Binding, 'node'>, status: NodeStatus, answer?: NodeAnswer) {
  const log: string[] = [];
  const sent: { status: number; headers: Record<string, string>; body: string }[] = [];
  const scheduler: Partial<Scheduler> = {
    async lookupNode() {
      return { node: { nodeId: 'a', url: 'http://a', status }, ...binding };
    },
    async recordPause(sandboxId, nodeId, stored) {
      log.push(`scheduler: ${sandboxId} paused on ${nodeId}, ${stored ? 'stored' : 'on its disk only'}`);
    },
    async schedule() {
      log.push('scheduler: placement');
      throw new Error('no placement expected');
    },
  };
  const unreachable = () => new DomainError('bad_gateway', 'node a: connection refused');
  const nodes: Pick<NodeHttp, 'call' | 'stream'> = {
    async call(node, call) {
      log.push(`node ${node.nodeId}: ${call.method} ${call.path}`);
      if (!answer) throw unreachable();
      return answer;
    },
    async stream(node) {
      log.push(`node ${node.nodeId}: streamed`);
      throw unreachable();
    },
  };
  const ctx = fakeContext(scheduler, nodes);
  const req = (method: string, url: string) =>
    Object.assign(Readable.from([]), { method, url, headers: {} }) as unknown as ClientRequest;
  const res = {
    headersSent: false,
    writeHead(code: number, headers: Record<string, string> = {}) {
      sent.push({ status: code, headers, body: '' });
    },
    end(body?: Buffer | string) {
      if (body) sent.at(-1)!.body = String(body);
    },
  } as unknown as ClientResponse;
  return { ctx, req, res, log, sent };
}

const pausedOnA = { state: 'paused', pauseId: 'older', pauseLocalOnly: true };
const noContent = (stored: boolean): NodeAnswer => ({
  status: 204,
  headers: { 'x-aenv-pause-stored': String(stored) },
  body: Buffer.alloc(0),
});

describe('a pause through the gateway', () => {
  it('is recorded with the scheduler before the client hears of it, stored or not', async () => {
    for (const stored of [false, true]) {
      const g = gateway({ state: 'running' }, 'ready', noContent(stored));
      await handlePause(g.ctx, g.req('POST', '/sandboxes/s1/pause'), g.res, 's1');
      expect(g.log).toEqual([
        'node a: POST /sandboxes/s1/pause',
        `scheduler: s1 paused on a, ${stored ? 'stored' : 'on its disk only'}`,
      ]);
      expect(g.sent.map((s) => s.status)).toEqual([204]);
    }
  });
});

describe('a sandbox paused on a node that is away, its pause not stored yet', () => {
  it('connect answers a retryable 503 naming the node, and never resumes an older pause elsewhere', async () => {
    for (const status of ['unhealthy', 'ready'] as const) {
      const g = gateway(pausedOnA, status);
      const err = await handleResume(g.ctx, g.req('POST', '/sandboxes/s1/connect'), g.res, 's1').catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DomainError);
      expect((err as DomainError).kind).toBe('unavailable');
      expect((err as DomainError).retryAfter).toBeGreaterThan(0);
      expect((err as DomainError).message).toMatch(/stored only on node a/);
      expect(g.log).not.toContain('scheduler: placement');
    }
  });

  it('GET says it is paused and not stored; other calls answer 503', async () => {
    const g = gateway(pausedOnA, 'unhealthy');
    await handleSandboxCall(g.ctx, g.req('GET', '/sandboxes/s1'), g.res, 's1');
    expect(g.sent[0]!.status).toBe(200);
    expect(JSON.parse(g.sent[0]!.body)).toMatchObject({ state: 'paused', nodeID: 'a', pauseStored: false });
    const other = handleSandboxCall(g.ctx, g.req('DELETE', '/sandboxes/s1'), g.res, 's1');
    await expect(other).rejects.toMatchObject({ kind: 'unavailable' });
    // Not yet judged unhealthy, but not answering: the same.
    const early = gateway(pausedOnA, 'ready');
    await handleSandboxCall(early.ctx, early.req('GET', '/sandboxes/s1'), early.res, 's1');
    expect(early.log).toEqual(['node a: streamed']);
    expect(JSON.parse(early.sent[0]!.body)).toMatchObject({ pauseStored: false });
  });

  it('a running sandbox on an unreachable node is still a 502', async () => {
    const g = gateway({ state: 'running' }, 'ready');
    await expect(handleSandboxCall(g.ctx, g.req('GET', '/sandboxes/s1'), g.res, 's1')).rejects.toMatchObject({
      kind: 'bad_gateway',
    });
  });
});
