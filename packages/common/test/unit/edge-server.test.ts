import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:http2';
import { request as httpsRequest } from 'node:https';
import { connect as connectTcp, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEdgeServer, tlsFiles } from '../../src/edge-server.js';

/** What an HTTP/1-minded handler saw, and an answer with headers HTTP/2 forbids. */
const handler = (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => {
  res.setHeader('keep-alive', 'timeout=5');
  res.writeHead(200, {
    connection: 'keep-alive',
    'transfer-encoding': 'chunked',
    'content-type': 'application/json',
  });
  res.end(
    JSON.stringify({
      host: req.headers.host,
      pseudo: Object.keys(req.headers).filter((k) => k.startsWith(':')),
    }),
  );
};

describe('the edge server', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'aenv-edge-'));
  let ca: string;

  beforeAll(() => {
    const f = (n: string) => path.join(dir, n);
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=edge.test',
        '-addext',
        'subjectAltName=DNS:edge.test,DNS:*.edge.test',
        '-keyout',
        f('key.pem'),
        '-out',
        f('cert.pem'),
      ],
      { stdio: 'pipe' },
    );
    ca = readFileSync(f('cert.pem'), 'utf8');
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('takes TLS files from tls_cert and tls_key only when both are set', () => {
    expect(tlsFiles({ tlsCert: '/c' })).toBeUndefined();
    expect(tlsFiles({ tlsCert: '/c', tlsKey: '/k' })).toEqual({ certPath: '/c', keyPath: '/k' });
  });

  it('answers HTTP/2 clients of an HTTP/1-minded handler: Host from :authority, no connection headers', async () => {
    const server = createEdgeServer(handler, {
      certPath: path.join(dir, 'cert.pem'),
      keyPath: path.join(dir, 'key.pem'),
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      const session = connect(`https://127.0.0.1:${port}`, { ca, servername: '8080-abc.edge.test' });
      const got = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = session.request({ ':path': '/', ':authority': `8080-abc.edge.test:${port}` });
        let body = '';
        let status = 0;
        req.on('response', (h) => (status = Number(h[':status'])));
        req.setEncoding('utf8');
        req.on('data', (d: string) => (body += d));
        req.on('end', () => resolve({ status, body }));
        req.on('error', reject);
        req.end();
      });
      expect(session.alpnProtocol).toBe('h2');
      session.close();
      expect(got.status).toBe(200);
      expect(JSON.parse(got.body)).toEqual({ host: `8080-abc.edge.test:${port}`, pseudo: [] });
      // HTTP/1.1 over TLS for clients that do not offer h2.
      const status = await new Promise<number>((resolve, reject) => {
        const r = httpsRequest({ host: '127.0.0.1', port, path: '/', ca, servername: 'edge.test' }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        r.on('error', reject);
        r.end();
      });
      expect(status).toBe(200);
    } finally {
      server.close();
    }
  });

  it('is plain HTTP/1.1 without TLS', async () => {
    const server = createEdgeServer(handler);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      const body = await new Promise<string>((resolve, reject) => {
        const r = httpRequest({ host: '127.0.0.1', port, path: '/' }, (res) => {
          let b = '';
          res.on('data', (d: Buffer) => (b += d));
          res.on('end', () => resolve(b));
        });
        r.on('error', reject);
        r.end();
      });
      expect(JSON.parse(body)).toEqual({ host: `127.0.0.1:${port}`, pseudo: [] });
      expect(server.requestTimeout).toBe(0);
    } finally {
      server.close();
    }
  });

  it('closes without waiting for a connection that never sent a request', async () => {
    const server = createEdgeServer(handler);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const silent = connectTcp(port, '127.0.0.1');
    await once(silent, 'connect');
    const dropped = once(silent, 'close');
    // Node would hold this close for headersTimeout (a minute); the test's timeout is 5 s.
    await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    await dropped;
  });
});
