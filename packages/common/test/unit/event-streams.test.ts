import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, followStream, stalledStream, type FollowedStream } from '@agentenv/test-support';
import { DomainError } from '../../src/errors.js';
import { errorBody, errorHeaders } from '../../src/http.js';
import { EventStreams, type StreamLimits } from '../../src/event-streams.js';

const KiB = 1024;
const CHUNK = `data: ${'x'.repeat(16 * KiB)}\n\n`;

/** What the server saw of one stream, by the `who` its client named. */
interface Seen {
  closed: boolean;
  /** The most the stream held unsent when an event was written to it. */
  peakBuffered: number;
}

let servers: http.Server[] = [];
const clients: { close(): void }[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  servers = [];
});

/**
 * A server of busy event streams over `gate`: each admitted client gets a 16 KiB event every
 * 2 ms until it goes; a refused one gets the error's status and Retry-After.
 */
async function eventServer(gate: EventStreams) {
  const seen = new Map<string, Seen>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const key = req.headers['x-api-key'];
    try {
      gate.admit(typeof key === 'string' ? key : undefined, res);
    } catch (err) {
      const r = errorBody(err as DomainError);
      res.writeHead(r.status, { 'content-type': 'application/json', ...errorHeaders(r) });
      res.end(JSON.stringify(r.body));
      return;
    }
    const s: Seen = { closed: false, peakBuffered: 0 };
    seen.set(url.searchParams.get('who') ?? '', s);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const timer = setInterval(() => {
      s.peakBuffered = Math.max(s.peakBuffered, res.writableLength);
      gate.write(res, CHUNK);
    }, 2);
    res.once('close', () => {
      s.closed = true;
      clearInterval(timer);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, seen };
}

function reader(port: number, who: string, key = 'k1'): FollowedStream {
  const s = followStream(port, `/?who=${who}`, key);
  clients.push(s);
  return s;
}

const limits = (o: Partial<StreamLimits>): StreamLimits => ({
  maxOpen: 100,
  maxPerKey: 100,
  maxBufferedBytes: 256 * KiB,
  ...o,
});

describe('event streams', () => {
  it('refuses a stream over the cap per API key, and over the total, with 429 and Retry-After', async () => {
    const gate = new EventStreams(limits({ maxPerKey: 2, maxOpen: 3 }));
    const { port } = await eventServer(gate);
    const a = [reader(port, 'a1'), reader(port, 'a2')];
    await eventually(() => expect(a.map((r) => r.status)).toEqual([200, 200]));
    const third = reader(port, 'a3');
    await eventually(() => expect(third.status).toBe(429));
    expect(third.retryAfter).toBe('5');
    expect(JSON.parse(third.body)).toEqual({
      code: 429,
      message: 'this API key has 2 event streams open, the most it may; close one or retry later',
    });
    // Another key still gets one, up to the total.
    const b = reader(port, 'b1', 'k2');
    await eventually(() => expect(b.status).toBe(200));
    const c = reader(port, 'c1', 'k3');
    await eventually(() => expect(c.status).toBe(429));
    expect(JSON.parse(c.body).message).toBe('3 event streams are open, the most this server keeps');
    expect(gate.size).toBe(3);
  });

  it('counts a stream only until it closes', async () => {
    const gate = new EventStreams(limits({ maxPerKey: 1 }));
    const { port, seen } = await eventServer(gate);
    const first = reader(port, 'first');
    await eventually(() => expect(first.status).toBe(200));
    for (const c of clients.splice(0)) c.close();
    await eventually(() => expect(seen.get('first')?.closed).toBe(true));
    expect(gate.size).toBe(0);
    const again = reader(port, 'again');
    await eventually(() => expect(again.status).toBe(200));
  });

  it('drops a client that does not read, holding no more than the bound, while others flow', async () => {
    const gate = new EventStreams(limits({ maxBufferedBytes: 256 * KiB }));
    const { port, seen } = await eventServer(gate);
    const flowing = reader(port, 'flowing');
    const stalled = stalledStream(port, '/?who=stalled', 'k1');
    clients.push({ close: () => stalled.destroy() });
    await eventually(() => expect(seen.get('stalled')?.closed).toBe(true), { timeoutMs: 20_000 });
    // What the server held for it never went past the bound by more than the event it refused.
    expect(seen.get('stalled')!.peakBuffered).toBeLessThanOrEqual(256 * KiB + CHUNK.length);
    expect(gate.size).toBe(1);
    const before = flowing.received;
    await eventually(() => expect(flowing.received).toBeGreaterThan(before + 1024 * KiB));
    expect(seen.get('flowing')!.closed).toBe(false);
  });
});
