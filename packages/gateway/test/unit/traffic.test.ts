import { PassThrough } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { IncomingMessage } from 'node:http';
import type { GatewayContext } from '../../src/context.js';
import { handleTraffic, handleTrafficUpgrade } from '../../src/handlers/traffic.js';
import type { Scheduler } from '../../src/scheduler/scheduler.js';
import type { ClientRequest, ClientResponse, NodeHttp } from '../../src/upstream/node-http.js';

/** A gateway whose sandboxes all live on node a; `log` says what the scheduler and node heard. */
function gateway() {
  const log: string[] = [];
  const scheduler: Pick<Scheduler, 'lookupNode'> = {
    async lookupNode(id) {
      log.push(`lookup ${id}`);
      return { node: { nodeId: 'a', url: 'http://a', status: 'ready' }, state: 'running' };
    },
  };
  const nodes: Pick<NodeHttp, 'stream' | 'upgrade'> = {
    async stream(node, req) {
      log.push(`node ${node.nodeId}: ${req.url}`);
    },
    async upgrade(node, req) {
      log.push(`node ${node.nodeId} upgrade: ${req.url}`);
    },
  };
  const ctx = {
    scheduler: scheduler as Scheduler,
    nodes: nodes as NodeHttp,
    logger: pino({ level: 'silent' }),
    tls: false,
  } as GatewayContext;
  return { ctx, log };
}

const req = (url: string) => ({ url, method: 'POST', headers: {} }) as unknown as ClientRequest;
const route = (path: string, port = 49983) => ({ sandboxId: 's1', port, path, native: false });

describe('sandbox traffic through the gateway', () => {
  it.each(['/init', '/./init?x=1', '/INIT/'])(
    'refuses envd’s node-only %s before looking the sandbox up',
    async (path) => {
      const g = gateway();
      await expect(handleTraffic(g.ctx, req(path), {} as ClientResponse, route(path))).rejects.toMatchObject({
        kind: 'forbidden',
        message: expect.stringMatching(/^envd's \/init is called by the sandbox's node only/),
      });
      expect(g.log).toEqual([]);
    },
  );

  it('passes envd’s other paths and other ports’ /init on to the node', async () => {
    const g = gateway();
    await handleTraffic(g.ctx, req('/files'), {} as ClientResponse, route('/files'));
    await handleTraffic(g.ctx, req('/init'), {} as ClientResponse, route('/init', 8080));
    expect(g.log).toEqual(['lookup s1', 'node a: /files', 'lookup s1', 'node a: /init']);
  });

  it('refuses an upgrade to envd’s /init with a 403 on the socket', async () => {
    const g = gateway();
    const socket = new PassThrough();
    let written = '';
    socket.on('data', (c: Buffer) => (written += c));
    await handleTrafficUpgrade(
      g.ctx,
      req('/init') as IncomingMessage,
      socket,
      Buffer.alloc(0),
      route('/init'),
    );
    expect(written.split('\r\n')[0]).toBe('HTTP/1.1 403 Forbidden');
    expect(g.log).toEqual([]);
  });
});
