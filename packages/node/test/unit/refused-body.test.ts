import { connect, type Socket } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drainRefusedBodies } from '../../src/api/refused-body.js';

let app: FastifyInstance;
let port: number;

beforeAll(async () => {
  app = Fastify({ bodyLimit: 1024 });
  app.addHook('onSend', drainRefusedBodies(1 << 20));
  app.post('/echo', async (req) => req.body);
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as { port: number }).port;
});
afterAll(() => app.close());

/** A raw connection whose received bytes are collected, so the test sees every answer. */
async function rawClient(): Promise<{
  socket: Socket;
  received: () => string;
  closed: Promise<Error | undefined>;
}> {
  const socket = connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  const closed = new Promise<Error | undefined>((resolve) => {
    socket.once('error', resolve);
    socket.once('close', () => resolve(undefined));
  });
  return { socket, received: () => text, closed };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
}

const head = (length: number): string =>
  `POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`;

describe('a body over the limit', () => {
  it('is answered 413 and read to its end, so the sender sees the answer and can go on', async () => {
    const c = await rawClient();
    const total = 256 << 10;
    c.socket.write(head(total));
    c.socket.write(Buffer.alloc(4096, 'x'));
    await until(() => c.received().includes('\r\n\r\n'));
    expect(c.received()).toMatch(/^HTTP\/1\.1 413 /);
    expect(c.received().toLowerCase()).not.toContain('connection: close');
    // The rest of the upload after the answer is taken in, not reset.
    await new Promise<void>((resolve, reject) =>
      c.socket.write(Buffer.alloc(total - 4096, 'x'), (e) => (e ? reject(e) : resolve())),
    );
    const before = c.received().length;
    c.socket.write(`${head(7)}{"a":1}`);
    await until(() => c.received().length > before && c.received().slice(before).includes('{"a":1}'));
    expect(c.received().slice(before)).toMatch(/^HTTP\/1\.1 200 /);
    c.socket.end();
    expect(await c.closed).toBeUndefined();
  });

  it('closes the connection once the discarded part passes the bound', async () => {
    const c = await rawClient();
    c.socket.write(head(64 << 20));
    const chunk = Buffer.alloc(64 << 10, 'x');
    for (let i = 0; i < 64 && !c.socket.destroyed; i++) {
      const ok = await new Promise<boolean>((resolve) => c.socket.write(chunk, (e) => resolve(!e)));
      if (!ok) break;
    }
    await c.closed;
    expect(c.received()).toMatch(/^HTTP\/1\.1 413 /);
    expect(c.socket.destroyed).toBe(true);
  });
});
