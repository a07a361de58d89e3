import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import type { NodeRef } from '../../src/scheduler/scheduler.js';
import { NodeHttp } from '../../src/upstream/node-http.js';
import { closeServers, listen } from './local-servers.js';

/** A node that takes requests and upgrades and never answers; it notes which of them are open. */
const waiting = new Map<string, IncomingMessage>();
const node = createServer((req) => void waiting.set(req.url!, req));
node.on('upgrade', (req: IncomingMessage, socket: Socket) => {
  waiting.set(req.url!, req);
  // Read, as a node's relay does, so that the peer's close is seen.
  socket.resume();
  socket.on('end', () => socket.destroy());
});
const open = (path: string) => {
  const req = waiting.get(path);
  return req !== undefined && !req.socket.destroyed;
};

const nodes = new NodeHttp();
let nodeRef: NodeRef;
const gateway = createServer((req, res) => {
  nodes.stream(nodeRef, req, res, { tls: false }).catch(() => res.destroy());
});
gateway.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
  nodes.upgrade(nodeRef, req, socket, head, { tls: false }).catch(() => socket.destroy());
});
let gatewayPort: number;

beforeAll(async () => {
  nodeRef = { nodeId: 'n1', url: `http://127.0.0.1:${await listen(node)}`, status: 'ready' } as NodeRef;
  gatewayPort = await listen(gateway);
});

afterAll(async () => {
  nodes.close();
  await closeServers(gateway, node);
});

/** A client that sends `head` through the gateway, waits until the node holds it, then goes away. */
async function leaveAfter(path: string, head: string): Promise<void> {
  const client = connect(gatewayPort, '127.0.0.1');
  await once(client, 'connect');
  client.write(head);
  await eventually(() => expect(open(path), `the node holds ${path}`).toBe(true), { timeoutMs: 5_000 });
  client.destroy();
}

describe('a client that leaves before the node answers', { timeout: 15_000 }, () => {
  it('closes the upgrade the gateway opened to the node for it', async () => {
    await leaveAfter(
      '/ws',
      'GET /ws HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await eventually(() => expect(open('/ws'), 'the node’s side of the upgrade').toBe(false), {
      timeoutMs: 5_000,
    });
  });

  it('closes the streamed request the gateway opened to the node for it, mid-body', async () => {
    await leaveAfter('/upload', 'POST /upload HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000\r\n\r\nabc');
    await eventually(() => expect(open('/upload'), 'the node’s side of the request').toBe(false), {
      timeoutMs: 5_000,
    });
  });
});
