import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routeRequest } from '@agentenv/common';
import { connectEnvelope, connectMessages, eventually } from '@agentenv/test-support';
import { FakeNode } from '@agentenv/test-support/fakes';
import { cutError } from '../../src/proxy/stream-cuts.js';
import { SandboxProxy } from '../../src/proxy/proxy.js';

describe('stream cuts', () => {
  it('say why: unavailable for a sandbox paused, killed or lost, aborted for a capture', () => {
    expect(cutError('s1', 'pause')).toEqual({ code: 'unavailable', message: 'sandbox s1 was paused' });
    expect(cutError('s1', 'kill')).toEqual({ code: 'unavailable', message: 'sandbox s1 was killed' });
    expect(cutError('s1', 'fork').code).toBe('aborted');
    expect(cutError('s1', 'lost').code).toBe('unavailable');
  });
});

/** A sandbox port whose answers are Connect streams that stay open, mid-envelope. */
let servers: { upstream: Server; proxy: Server };
let ports: { sandbox: number; proxy: number };
let node: FakeNode;
let proxy: SandboxProxy;
const open = new Set<ServerResponse>();

const listen = (s: Server) =>
  new Promise<number>((r) => s.listen(0, '127.0.0.1', () => r((s.address() as AddressInfo).port)));

beforeAll(async () => {
  const upstream = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    const next = connectEnvelope({ event: { data: { stdout: 'aGVsbG8=' } } });
    // One whole message and the first half of the next: the stream is cut mid-envelope.
    res.write(Buffer.concat([connectEnvelope({ event: { start: { pid: 7 } } }), next.subarray(0, 8)]));
    open.add(res);
    if (req.url === '/lose') setTimeout(() => res.socket?.destroy(), 20);
  });
  node = new FakeNode({ hostAddress: '127.0.0.1' });
  proxy = new SandboxProxy(node.orchestrator, node.logger);
  node.orchestrator.beforeCapture((id, why) => proxy.drain(id, why));
  const proxyServer = createServer(
    (req, res) => void proxy.handle(routeRequest(req.url ?? '/', req.headers, [])!, req, res),
  );
  servers = { upstream, proxy: proxyServer };
  ports = { sandbox: await listen(upstream), proxy: await listen(proxyServer) };
});

afterAll(async () => {
  proxy.close();
  for (const res of open) res.destroy();
  await new Promise((r) => servers.proxy.close(r));
  await new Promise((r) => servers.upstream.close(r));
});

/** Starts a stream through the proxy; `body` resolves once it ends (rejects when it is cut). */
async function stream(id: string, path = '/process.Process/Start'): Promise<{ body: Promise<Buffer> }> {
  const r = await fetch(`http://127.0.0.1:${ports.proxy}${path}`, {
    method: 'POST',
    headers: { 'e2b-sandbox-id': id, 'e2b-sandbox-port': String(ports.sandbox) },
    body: '{}',
  });
  expect(r.headers.get('content-type')).toBe('application/connect+json');
  return { body: r.arrayBuffer().then((b) => Buffer.from(b)) };
}

const started = [0, { event: { start: { pid: 7 } } }] as const;

describe('a Connect stream through the proxy', () => {
  it('ends with unavailable, not a broken body, when its sandbox is paused or killed', async () => {
    for (const [op, word] of [
      ['pause', 'paused'],
      ['kill', 'killed'],
    ] as const) {
      const id = (await node.create()).sandboxId;
      const { body } = await stream(id);
      await eventually(() => expect(node.orchestrator.activity.openRequests(id)).toBe(1));
      await (op === 'pause' ? node.orchestrator.pause(id) : node.orchestrator.kill(id));
      expect(connectMessages(await body)).toEqual([
        [0, started[1]],
        [2, { error: { code: 'unavailable', message: `sandbox ${id} was ${word}` } }],
      ]);
      if (op === 'pause') await node.orchestrator.kill(id);
    }
  });

  it('ends with aborted when a snapshot of its running sandbox closes its connections', async () => {
    const id = (await node.create()).sandboxId;
    const { body } = await stream(id);
    await eventually(() => expect(node.orchestrator.activity.openRequests(id)).toBe(1));
    await node.orchestrator.snapshot(id);
    const end = connectMessages(await body).at(-1)!;
    expect(end).toMatchObject([2, { error: { code: 'aborted' } }]);
    expect(node.orchestrator.get(id).state).toBe('running');
    await node.orchestrator.kill(id);
  });

  it('ends with unavailable when the sandbox side of the connection breaks by itself', async () => {
    const id = (await node.create()).sandboxId;
    const { body } = await stream(id, '/lose');
    expect(connectMessages(await body)).toEqual([
      [0, started[1]],
      [2, { error: { code: 'unavailable', message: `the connection to sandbox ${id} was lost` } }],
    ]);
    await node.orchestrator.kill(id);
  });
});
