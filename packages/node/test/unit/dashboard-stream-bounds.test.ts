import type { AddressInfo } from 'node:net';
import { LifecycleActivity } from '@agentenv/dashboard';
import { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  eventually,
  followStream,
  openConnections,
  stalledStream,
  type FollowedStream,
} from '@agentenv/test-support';
import { errorHandler } from '../../src/api/errors.js';
import { dashboardRoutes, type DashboardRoutesOptions } from '../../src/api/routes/dashboard.js';

const KiB = 1024;
const STREAM = '/dashboard/api/stream';

/**
 * The node's dashboard routes over stand-ins, with a lifecycle event source that the test
 * fires as fast as it likes (each event carries 16 KiB), and small stream limits.
 */
async function dashboard(): Promise<{ app: FastifyInstance; port: number; fire: () => void }> {
  const listeners = new Set<(e: never) => void>();
  const opts = {
    orchestrator: { counts: () => ({}), list: () => [], find: () => undefined },
    activity: new LifecycleActivity('n1'),
    events: {
      onEvent: (fn: (e: never) => void) => {
        listeners.add(fn);
        return () => listeners.delete(fn);
      },
    },
    nodeStatus: () => ({ nodeID: 'n1' }),
    snapshots: {},
    usage: {},
    streamLimits: { maxOpen: 10, maxPerKey: 3, maxBufferedBytes: 256 * KiB },
  } as unknown as DashboardRoutesOptions;
  const app = Fastify().withTypeProvider<TypeBoxTypeProvider>();
  app.setErrorHandler(errorHandler);
  await app.register(dashboardRoutes, opts);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const event = { type: 'created', sandboxID: 's1', pad: 'x'.repeat(16 * KiB) } as never;
  return {
    app,
    port: (app.server.address() as AddressInfo).port,
    fire: () => {
      for (const l of listeners) l(event);
    },
  };
}

let d: Awaited<ReturnType<typeof dashboard>>;
const clients: { close(): void }[] = [];
beforeEach(async () => {
  d = await dashboard();
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await d.app.close();
});

const follow = (key: string): FollowedStream => {
  const s = followStream(d.port, STREAM, key);
  clients.push(s);
  return s;
};

describe("the node's dashboard stream", { timeout: 30_000 }, () => {
  it('refuses a stream over the cap per API key with 429 and Retry-After', async () => {
    const mine = [follow('k1'), follow('k1'), follow('k1')];
    await eventually(() => expect(mine.map((s) => s.status)).toEqual([200, 200, 200]));
    const over = follow('k1');
    await eventually(() => expect(over.status).toBe(429));
    expect(over.retryAfter).toBe('5');
    expect(JSON.parse(over.body).message).toMatch(/this API key has 3 event streams open/);
    const other = follow('k2');
    await eventually(() => expect(other.status).toBe(200));
  });

  it('drops a client that stops reading, while the others keep receiving', async () => {
    const flowing = follow('k1');
    await eventually(() => expect(flowing.status).toBe(200));
    let accepted = 0;
    d.app.server.on('connection', () => accepted++);
    const stalled = stalledStream(d.port, STREAM, 'k2');
    clients.push({ close: () => stalled.destroy() });
    // Events come faster than the stalled client takes them: the node drops it, not buffers.
    const firing = setInterval(() => {
      for (let i = 0; i < 8; i++) d.fire();
    }, 2);
    try {
      // The node took the stalled stream and closed its end of it (the paused client cannot see it).
      await eventually(
        async () => {
          expect(accepted).toBe(1);
          expect(await openConnections(d.app.server)).toBe(1);
        },
        { timeoutMs: 20_000 },
      );
      const before = flowing.received;
      await eventually(() => expect(flowing.received).toBeGreaterThan(before + 1024 * KiB));
      expect(flowing.ended).toBe(false);
    } finally {
      clearInterval(firing);
    }
  });
});
