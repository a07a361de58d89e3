import { request } from 'node:http';
import { PORT } from './server-fixture.js';

/** GET through the test node's proxy with a `{port}-{id}.{domain}` Host, as a browser would. */
export function getViaHost(host: string, path = '/'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: PORT, path, headers: { host } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
