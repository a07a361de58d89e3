/* global fetch, setTimeout, Buffer, URL */
// An E2B SDK user against an AgentENV edge listening with TLS (run as a child process with
// NODE_EXTRA_CA_CERTS and test-domain.mjs): no E2B_SANDBOX_URL, so the SDK reaches envd at
// https://49983-{id}.{domain} and the sandbox's port at its getHost() URL, as against E2B. The
// sandbox keeps its URLs private (allowPublicTraffic: false) and resumes on traffic.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import { Sandbox } from 'e2b';

const SERVER = readFileSync(new URL('./sandbox-web.py', import.meta.url), 'utf8');
const TOKEN = 'e2b-traffic-access-token';

/** Retries `get` until it answers 200 (the server in the sandbox is starting). */
async function until200(get) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await get().catch((e) => ({ status: 0, error: String(e.cause ?? e) }));
    if (r.status === 200) return r;
    if (Date.now() > deadline)
      throw new Error(`getHost URL never answered: ${JSON.stringify(r.error ?? r.status)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

/** The same URL over HTTP/2 (offered by ALPN): the proxied answer's HTTP/1 headers are dropped. */
function overHttp2(host, headers) {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://${host}`);
    session.on('error', reject);
    const req = session.request({ ':path': '/index.html', ...headers });
    let body = '';
    let status = 0;
    req.setEncoding('utf8');
    req.on('response', (h) => (status = h[':status']));
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      session.close();
      resolve({ status, body, alpn: session.alpnProtocol });
    });
    req.on('error', reject);
    req.end();
  });
}

/** The server-sent events of /sse, read to the end of the stream. */
async function events(host, headers) {
  const r = await fetch(`https://${host}/sse`, { headers });
  return { type: r.headers.get('content-type'), body: await r.text() };
}

/** One WebSocket message there and back (a client frame is masked, RFC 6455 §5.3). */
function websocketEcho(host, headers, text) {
  return new Promise((resolve, reject) => {
    const req = https.request({
      host,
      path: '/ws',
      headers: {
        ...headers,
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
      },
    });
    req.on('response', (res) => resolve({ status: res.statusCode }));
    req.on('error', reject);
    req.on('upgrade', (res, socket) => {
      const payload = Buffer.from(text);
      const mask = randomBytes(4);
      const masked = payload.map((b, i) => b ^ mask[i % 4]);
      socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]));
      let got = Buffer.alloc(0);
      socket.on('data', (d) => {
        got = Buffer.concat([got, d]);
        if (got.length >= 2 && got.length >= 2 + got[1]) {
          socket.destroy();
          resolve({ status: res.statusCode, message: got.subarray(2, 2 + got[1]).toString() });
        }
      });
      socket.on('error', reject);
    });
    req.end();
  });
}

const out = {};
const sbx = await Sandbox.create({
  timeoutMs: 120_000,
  network: { allowPublicTraffic: false },
  lifecycle: { onTimeout: 'pause', autoResume: true },
});
try {
  out.sandboxId = sbx.sandboxId;
  out.echo = (await sbx.commands.run('echo over-tls')).stdout.trim();
  await sbx.files.write('/tmp/web.py', SERVER);
  await sbx.commands.run('python3 /tmp/web.py 8080', { background: true });
  const host = sbx.getHost(8080);
  const auth = { [TOKEN]: sbx.trafficAccessToken };
  out.host = host;
  out.http1 = await (await until200(() => fetch(`https://${host}/index.html`, { headers: auth }))).text();
  out.withoutToken = (await fetch(`https://${host}/index.html`)).status;
  out.wrongToken = (await fetch(`https://${host}/index.html`, { headers: { [TOKEN]: 'wrong' } })).status;
  const h2 = await overHttp2(host, auth);
  [out.http2Status, out.http2, out.alpn] = [h2.status, h2.body, h2.alpn];
  out.sse = await events(host, auth);
  out.websocket = await websocketEcho(host, auth, 'hello over tls');
  out.websocketWithoutToken = await websocketEcho(host, {}, 'refused');

  await sbx.pause();
  out.pausedWithoutToken = (await fetch(`https://${host}/index.html`)).status;
  out.stateAfterRefusal = (await sbx.getInfo()).state;
  const resumed = await fetch(`https://${host}/index.html`, { headers: auth });
  out.resumed = { status: resumed.status, body: await resumed.text() };
  out.stateAfterTraffic = (await sbx.getInfo()).state;
} finally {
  await sbx.kill();
}
process.stdout.write(JSON.stringify(out) + '\n');
