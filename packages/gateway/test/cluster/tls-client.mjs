/* global fetch, setTimeout */
// An E2B SDK user against an AgentENV edge listening with TLS (run as a child process with
// NODE_EXTRA_CA_CERTS and test-domain.mjs): no E2B_SANDBOX_URL, so the SDK reaches envd at
// https://49983-{id}.{domain} and the sandbox's port at its getHost() URL, as against E2B.
import http2 from 'node:http2';
import { Sandbox } from 'e2b';

const out = {};
const sbx = await Sandbox.create({ timeoutMs: 120_000 });
try {
  out.sandboxId = sbx.sandboxId;
  out.echo = (await sbx.commands.run('echo over-tls')).stdout.trim();
  await sbx.files.write('/tmp/index.html', 'served over tls\n');
  await sbx.commands.run('cd /tmp && python3 -m http.server 8080', { background: true });
  const host = sbx.getHost(8080);
  out.host = host;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await fetch(`https://${host}/index.html`).catch((e) => ({
      status: 0,
      error: String(e.cause ?? e),
    }));
    if (r.status === 200) {
      out.http1 = await r.text();
      break;
    }
    if (Date.now() > deadline)
      throw new Error(`getHost URL never answered: ${JSON.stringify(r.error ?? r.status)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
  // The same URL over HTTP/2 (offered by ALPN): the proxied answer's HTTP/1 headers are dropped.
  out.http2 = await new Promise((resolve, reject) => {
    const session = http2.connect(`https://${host}`);
    session.on('error', reject);
    const req = session.request({ ':path': '/index.html' });
    let body = '';
    req.setEncoding('utf8');
    req.on('response', (h) => (out.http2Status = h[':status']));
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      out.alpn = session.alpnProtocol;
      session.close();
      resolve(body);
    });
    req.on('error', reject);
    req.end();
  });
} finally {
  await sbx.kill();
}
process.stdout.write(JSON.stringify(out) + '\n');
