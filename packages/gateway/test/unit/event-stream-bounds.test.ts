import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { EventStreams } from '@agentenv/common';
import { clusterDashboardHandler } from '@agentenv/dashboard';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
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
const open: (http.ClientRequest | net.Socket)[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) o.destroy();
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

function follow(port: number, path: string, key: string) {
  const s = { status: 0, received: 0, retryAfter: undefined as string | undefined, body: '', ended: false };
  const req = http.get({ port, host: '127.0.0.1', path, headers: { 'x-api-key': key } }, (res) => {
    s.status = res.statusCode ?? 0;
    s.retryAfter = res.headers['retry-after'];
    res.on('data', (c: Buffer) => {
      s.received += c.length;
      if (s.status !== 200) s.body += c.toString();
    });
    res.on('close', () => (s.ended = true));
  });
  req.on('error', () => undefined);
  open.push(req);
  return s;
}

const connections = () =>
  new Promise<number>((resolve, reject) => server!.getConnections((e, n) => (e ? reject(e) : resolve(n))));

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
      const stalled = net.connect(port, '127.0.0.1', () => {
        stalled.write(`GET ${path} HTTP/1.1\r\nhost: x\r\nx-api-key: k2\r\n\r\n`);
        stalled.pause();
      });
      stalled.on('error', () => undefined);
      open.push(stalled);
      // Both were taken, and the server closed its end of the stalled one (which cannot see it).
      await eventually(
        async () => {
          expect(flowing.status).toBe(200);
          expect(accepted).toBe(2);
          expect(await connections()).toBe(1);
        },
        { timeoutMs: 20_000 },
      );
      const before = flowing.received;
      await eventually(() => expect(flowing.received).toBeGreaterThan(before + 1024 * KiB));
      expect(flowing.ended).toBe(false);
    });
  }
});
