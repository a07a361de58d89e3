import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { GatewayContext } from '../../src/context.js';
import { DomainError } from '@agentenv/common';
import { placeAndSend } from '../../src/handlers/place-retry.js';
import { GatewayMetrics } from '../../src/metrics.js';
import {
  PlacementRefused,
  type NodeRef,
  type PlacementHint,
  type Scheduler,
} from '../../src/scheduler/scheduler.js';
import type { NodeAnswer } from '../../src/upstream/node-http.js';

const node = (nodeId: string): NodeRef => ({ nodeId, url: `http://${nodeId}`, status: 'ready' });

/** A scheduler that places on the first node not excluded, and remembers what it was told. */
function scheduler(nodes: string[]) {
  const log: string[] = [];
  const s: Pick<Scheduler, 'schedule' | 'recordAssignment' | 'releaseReservation'> = {
    async schedule(h: PlacementHint) {
      log.push(`schedule exclude=${(h.excludeNodes ?? []).join(',')}`);
      const free = nodes.find((n) => !h.excludeNodes?.includes(n));
      if (!free) throw new PlacementRefused('no_healthy_node', 'no node left', 5);
      return { node: node(free), reservationId: `r-${free}`, localityHit: false };
    },
    async recordAssignment(id, nodeId, r) {
      log.push(`record ${id}@${nodeId} ${r}`);
    },
    async releaseReservation(r) {
      log.push(`release ${r}`);
    },
  };
  const ctx = {
    scheduler: s as Scheduler,
    metrics: new GatewayMetrics({ queue: () => ({ waiting: 0, inFlight: 0 }), nodeLoad: async () => [] }),
    logger: pino({ level: 'silent' }),
  } as GatewayContext;
  return { ctx, log };
}

const answer = (status: number, body: unknown = {}, headers: Record<string, string> = {}): NodeAnswer => ({
  status,
  headers,
  body: Buffer.from(JSON.stringify(body)),
});

describe('placement of a create', () => {
  it('records the sandbox on the node that started it, with the reservation', async () => {
    const { ctx, log } = scheduler(['a', 'b']);
    const r = await placeAndSend(ctx, {}, async () => answer(201, { sandboxID: 's1' }));
    expect(r.node.nodeId).toBe('a');
    expect(log).toEqual(['schedule exclude=', 'record s1@a r-a']);
  });

  it('tries another node when one is full or unreachable, releasing what it reserved', async () => {
    const { ctx, log } = scheduler(['a', 'b', 'c']);
    const r = await placeAndSend(ctx, {}, async (n) => {
      if (n.nodeId === 'a') return answer(429, { code: 429 }, { 'retry-after': '5' });
      if (n.nodeId === 'b') throw new DomainError('bad_gateway', 'node b is unreachable');
      return answer(201, { sandboxID: 's2' });
    });
    expect(r.node.nodeId).toBe('c');
    expect(log).toEqual([
      'schedule exclude=',
      'release r-a',
      'schedule exclude=a',
      'release r-b',
      'schedule exclude=a,b',
      'record s2@c r-c',
    ]);
  });

  it('answers 429 with the nodes Retry-After when every node tried was full, never a 5xx', async () => {
    const { ctx } = scheduler(['a', 'b']);
    const full = placeAndSend(ctx, {}, async () => answer(503, { code: 503 }, { 'retry-after': '7' }));
    await expect(full).rejects.toMatchObject({ kind: 'capacity', retryAfter: 7 });
  });

  it('tries another node when one failed to start the sandbox', async () => {
    const { ctx } = scheduler(['a', 'b']);
    const r = await placeAndSend(ctx, {}, async (n) =>
      n.nodeId === 'a'
        ? answer(500, { code: 500, message: 'envd did not answer' })
        : answer(201, { sandboxID: 's3' }),
    );
    expect(r.node.nodeId).toBe('b');
  });

  it("passes the node's other refusals to the client unchanged", async () => {
    const { ctx, log } = scheduler(['a', 'b']);
    const r = await placeAndSend(ctx, {}, async () => answer(404, { code: 404, message: 'no template' }));
    expect(r.answer.status).toBe(404);
    expect(log).toEqual(['schedule exclude=', 'release r-a']);
  });

  it('passes a 501 (a feature no node has, docs/compatibility.md) to the client without trying another node', async () => {
    const { ctx, log } = scheduler(['a', 'b']);
    const message = 'iam is not supported by AgentENV: it issues no workload identity tokens';
    const r = await placeAndSend(ctx, {}, async () => answer(501, { code: 501, message }));
    expect(r.answer.status).toBe(501);
    expect(JSON.parse(r.answer.body.toString())).toEqual({ code: 501, message });
    expect(log).toEqual(['schedule exclude=', 'release r-a']);
  });

  it('keeps the exclusions a caller asked for, and refuses as the scheduler did when none are its own', async () => {
    const { ctx, log } = scheduler(['a']);
    await expect(placeAndSend(ctx, { excludeNodes: ['a'] }, async () => answer(201))).rejects.toMatchObject({
      kind: 'unavailable',
    });
    expect(log).toEqual(['schedule exclude=a']);
  });

  it('does not retry a node timeout (the node may still be starting the sandbox)', async () => {
    const { ctx, log } = scheduler(['a', 'b']);
    const slow = placeAndSend(ctx, {}, async () => {
      throw new DomainError('timeout', 'node a did not answer');
    });
    await expect(slow).rejects.toMatchObject({ kind: 'timeout' });
    expect(log).toEqual(['schedule exclude=', 'release r-a']);
  });
});
