import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { EventStreams } from '@agentenv/common';
import { clusterDashboardHandler } from '@agentenv/dashboard';
import { afterEach, describe, expect, it } from 'vitest';
import {
  eventually,
  followStream,
  openConnections,
  stalledStream,
  type FollowedStream,
} from '@agentenv/test-support';
import type { GatewayContext } from '../../src/context.js';
import { handleEventStream } from '../../src/handlers/cluster.js';
import { sendError } from '../../src/http.js';

const KiB = 1024;

/** The cluster's lifecycle events, 16 KiB each, as fast as the stream takes them, until `signal`. */
async function* flood(signal: AbortSignal): AsyncGenerator<object> {
  const reason = 'x'.repeat(16 * KiB);
  while (!signal.aborted) {
    for (let i = 0; i < 8; i++) yield { type: 'created', sandboxID: 's1', reason };
    await sleep(2);
  }
}

let server: http.Server | undefined;
/** Connections the server took, closed ones included. */
let accepted = 0;
const clients: { close(): void }[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  server = undefined;
});

/** The gateway's two streams (GET /events, the dashboard's) over a flood of events, small limits. */
async function gatewayStreams(): Promise<number> {
  const streams = new EventStreams({ maxOpen: 10, maxPerKey: 2, maxBufferedBytes: 256 * KiB });
  const ctx = { scheduler: { watchEvents: flood }, streams } as unknown as GatewayContext;
  const dashboard = clusterDashboardHandler({
    nodes: async () => [],
    events: flood,
    authorize: () => undefined,
    sendError,
    streams,
  });
  server = http.createServer((req, res) => {
    if (dashboard(req, res)) return;
    handleEventStream(ctx, res, undefined).catch((err: unknown) => sendError(res, err));
  });
  accepted = 0;
  server.on('connection', () => accepted++);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

const follow = (port: number, path: string, key: string): FollowedStream => {
  const s = followStream(port, path, key);
  clients.push(s);
  return s;
};

describe("the gateway's event streams", { timeout: 30_000 }, () => {
  for (const path of ['/events', '/dashboard/api/stream']) {
    it(`${path}: refuses a stream over the cap per API key with 429 and Retry-After`, async () => {
      const port = await gatewayStreams();
      // Both kinds of stream count against one key's cap.
      const mine = [follow(port, '/events', 'k1'), follow(port, '/dashboard/api/stream', 'k1')];
      await eventually(() => expect(mine.map((s) => s.status)).toEqual([200, 200]));
      const over = follow(port, path, 'k1');
      await eventually(() => expect(over.status).toBe(429));
      expect(over.retryAfter).toBe('5');
      expect(JSON.parse(over.body).message).toMatch(/this API key has 2 event streams open/);
    });

    it(`${path}: drops a client that stops reading, while another keeps receiving`, async () => {
      const port = await gatewayStreams();
      const flowing = follow(port, path, 'k1');
      const stalled = stalledStream(port, path, 'k2');
      clients.push({ close: () => stalled.destroy() });
      // Both were taken, and the server closed its end of the stalled one (which cannot see it).
      await eventually(
        async () => {
          expect(flowing.status).toBe(200);
          expect(accepted).toBe(2);
          expect(await openConnections(server!)).toBe(1);
        },
        { timeoutMs: 20_000 },
      );
      const before = flowing.received;
      await eventually(() => expect(flowing.received).toBeGreaterThan(before + 1024 * KiB));
      expect(flowing.ended).toBe(false);
    });
  }
});
