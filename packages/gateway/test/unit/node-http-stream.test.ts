import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBody } from '@agentenv/common';
import { connectEnvelope, connectMessages } from '@agentenv/test-support';
import type { NodeRef } from '../../src/scheduler/scheduler.js';
import { NodeHttp } from '../../src/upstream/node-http.js';
import { closeServers, listen } from './local-servers.js';

const CHUNK = Buffer.alloc(64 * 1024, 'x');
/** 4 MiB: the body is still going out when the node has answered and closed. */
const BODY_CHUNKS = 64;
const REFUSAL = JSON.stringify({ code: 413, message: 'request body too large' });

/**
 * A node that refuses any body at once, as one does with an upload over its limit: it answers 413
 * before reading the body and drops the connection, whose unread bytes make its kernel reset it.
 * On /drop it drops the connection without a word; a process stream breaks mid-envelope.
 */
const node = createServer((req, res) => {
  if (req.url === '/drop') return void req.socket.destroy();
  if (req.url === '/process.Process/Start') return brokenStream(req, res);
  res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
  res.end(REFUSAL, () => req.socket.destroy());
});

const started = { event: { start: { pid: 7 } } };

/** A Connect stream that breaks mid-envelope: one whole message, half of the next, gone. */
function brokenStream(req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'application/connect+json' });
  const next = connectEnvelope({ event: { data: { stdout: 'aGk=' } } });
  res.write(Buffer.concat([connectEnvelope(started), next.subarray(0, 8)]), () =>
    setTimeout(() => req.socket.destroy(), 20),
  );
}

const nodes = new NodeHttp();
/** The gateway's side: every request streamed to the node, a rejection answered as the gateway does. */
const gateway = createServer((req, res) => {
  nodes.stream(nodeRef, req, res, { tls: false }).catch((err: unknown) => {
    const { status, body } = errorBody(err);
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
});
let nodeRef: NodeRef;
let gatewayUrl: string;

beforeAll(async () => {
  nodeRef = { nodeId: 'n1', url: `http://127.0.0.1:${await listen(node)}`, status: 'ready' } as NodeRef;
  gatewayUrl = `http://127.0.0.1:${await listen(gateway)}`;
});

afterAll(async () => {
  nodes.close();
  await closeServers(gateway, node);
});

/** Streams a large body through the gateway; what the client got back: an answer or an error. */
function upload(path = '/upload'): Promise<string> {
  return new Promise((resolve) => {
    const req = request(`${gatewayUrl}${path}`, { method: 'POST' });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(`${res.statusCode} ${body}`));
      res.on('error', (err) => resolve(`${res.statusCode} cut: ${err.message}`));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(`client error ${err.code ?? err.message}`));
    let sent = 0;
    const more = () => {
      while (sent < BODY_CHUNKS && !req.destroyed) {
        sent++;
        if (!req.write(CHUNK)) return void req.once('drain', more);
      }
      if (!req.destroyed) req.end();
    };
    more();
  });
}

describe('NodeHttp.stream, when the node answers before reading the body and closes', () => {
  it("relays the node's answer, whatever the gateway's write to it met", async () => {
    const seen: string[] = [];
    for (let i = 0; i < 50; i++) seen.push(await upload());
    expect(seen).toEqual(Array(50).fill(`413 ${REFUSAL}`));
  });

  it('answers 502 when the node drops the connection without an answer', async () => {
    for (let i = 0; i < 10; i++)
      expect(await upload('/drop')).toMatch(
        /^502 .*node n1 \(http:\/\/127\.0\.0\.1:\d+\) is unreachable: ECONNRESET/,
      );
  });
});

describe('NodeHttp.stream of a Connect stream', () => {
  it('ends the client’s stream with unavailable when the node’s side breaks, not with a cut body', async () => {
    const r = await fetch(`${gatewayUrl}/process.Process/Start`, { method: 'POST', body: '{}' });
    const body = Buffer.from(await r.arrayBuffer());
    expect(connectMessages(body)).toEqual([
      [0, started],
      [2, { error: { code: 'unavailable', message: 'the connection to node n1 was lost' } }],
    ]);
  });
});
