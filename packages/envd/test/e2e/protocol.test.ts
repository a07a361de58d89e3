import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENVD_URL, type EnvdProcess, initEnvd, startEnvdProcess } from '@agentenv/test-support/envd';

/** One Connect streaming envelope: flags, 4-byte big-endian length, JSON. */
function envelope(msg: unknown, flags = 0): Buffer {
  const json = Buffer.from(JSON.stringify(msg));
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

function parseEnvelopes(buf: Buffer): { flags: number; msg: Record<string, unknown> }[] {
  const out = [];
  for (let off = 0; off + 5 <= buf.length;) {
    const len = buf.readUInt32BE(off + 1);
    out.push({ flags: buf[off]!, msg: JSON.parse(buf.subarray(off + 5, off + 5 + len).toString()) });
    off += 5 + len;
  }
  return out;
}

const rpc = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${ENVD_URL}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

const stream = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${ENVD_URL}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/connect+json', ...headers },
    body: envelope(body),
  });

let envd: EnvdProcess;
beforeAll(async () => {
  envd = await startEnvdProcess();
});
afterAll(async () => {
  await envd?.stop();
});

describe('envd wire protocol', () => {
  it('answers /health with 204 and /envs with the sandbox variables', async () => {
    expect((await fetch(`${ENVD_URL}/health`)).status).toBe(204);
    expect((await initEnvd({ envVars: { A: '1' } })).status).toBe(204);
    expect(await (await fetch(`${ENVD_URL}/envs`)).json()).toMatchObject({ A: '1' });
  });

  it('streams start, data and end envelopes, then an end-stream envelope', async () => {
    const r = await stream('/process.Process/Start', {
      process: { cmd: '/bin/sh', args: ['-c', 'printf hi; exit 2'] },
      stdin: false,
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/connect+json');
    const frames = parseEnvelopes(Buffer.from(await r.arrayBuffer()));
    const events = frames.filter((f) => f.flags === 0).map((f) => (f.msg as { event: object }).event);
    expect(events[0]).toHaveProperty('start.pid');
    expect(events).toContainEqual({ data: { stdout: Buffer.from('hi').toString('base64') } });
    expect(events.at(-1)).toEqual({
      end: { exitCode: 2, exited: true, status: 'exit status 2', error: 'exit status 2' },
    });
    expect(frames.at(-1)).toEqual({ flags: 2, msg: {} });
  });

  it('sends keepalive events during silence', async () => {
    const r = await stream(
      '/process.Process/Start',
      { process: { cmd: '/bin/sh', args: ['-c', 'sleep 2.5'] }, stdin: false },
      { 'keepalive-ping-interval': '1' },
    );
    const events = parseEnvelopes(Buffer.from(await r.arrayBuffer())).map((f) => f.msg.event);
    expect(events.filter((e) => e && 'keepalive' in (e as object)).length).toBeGreaterThanOrEqual(1);
  });

  it('reports bad input with Connect error codes', async () => {
    const unknown = await rpc('/process.Process/SendSignal', {
      process: { pid: 999999 },
      signal: 'SIGNAL_SIGKILL',
    });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'not_found' });

    const malformed = await rpc('/process.Process/List', '{not json');
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ code: 'invalid_argument' });

    const badField = await rpc('/process.Process/SendSignal', { process: { pid: 'x' } });
    expect(await badField.json()).toMatchObject({ code: 'invalid_argument' });

    const noCmd = await stream('/process.Process/Start', { process: { cmd: '' } });
    const frames = parseEnvelopes(Buffer.from(await noCmd.arrayBuffer()));
    expect(frames.at(-1)).toMatchObject({ flags: 2, msg: { error: { code: 'invalid_argument' } } });

    const missing = await stream('/process.Process/Start', { process: { cmd: '/no/such/binary' } });
    const end = parseEnvelopes(Buffer.from(await missing.arrayBuffer())).at(-1);
    expect(end).toMatchObject({ flags: 2, msg: { error: { code: 'invalid_argument' } } });

    const brokenEnvelope = await fetch(`${ENVD_URL}/process.Process/Start`, {
      method: 'POST',
      headers: { 'content-type': 'application/connect+json' },
      body: Buffer.from([0, 0, 0, 0, 99, 1, 2]),
    });
    const last = parseEnvelopes(Buffer.from(await brokenEnvelope.arrayBuffer())).at(-1);
    expect(last?.flags).toBe(2);
    expect(last?.msg).toHaveProperty('error.code');

    expect((await fetch(`${ENVD_URL}/nope`)).status).toBe(404);
    expect((await fetch(`${ENVD_URL}/health`)).status).toBe(204);
  });

  it('guards everything but /health with the access token once /init sets one', async () => {
    const token = 'secret-token-1';
    expect((await initEnvd({ accessToken: token })).status).toBe(204);
    try {
      expect((await fetch(`${ENVD_URL}/health`)).status).toBe(204);
      expect((await fetch(`${ENVD_URL}/envs`)).status).toBe(401);
      expect((await fetch(`${ENVD_URL}/metrics`)).status).toBe(401);
      const denied = await rpc('/process.Process/List', {});
      expect(denied.status).toBe(401);
      expect(await denied.json()).toMatchObject({ code: 'unauthenticated' });
      expect((await rpc('/process.Process/List', {}, { 'x-access-token': 'wrong' })).status).toBe(401);
      expect((await rpc('/process.Process/List', {}, { 'x-access-token': token })).status).toBe(200);
      // A process inside the sandbox must not be able to re-init envd without the token.
      expect((await initEnvd({ accessToken: 'mine' })).status).toBe(401);
      const metrics = await fetch(`${ENVD_URL}/metrics`, { headers: { 'x-access-token': token } });
      expect(await metrics.json()).toMatchObject({
        cpu_count: expect.any(Number),
        mem_total: expect.any(Number),
      });
    } finally {
      expect((await initEnvd({ accessToken: '' }, token)).status).toBe(204);
    }
    expect((await fetch(`${ENVD_URL}/envs`)).status).toBe(200);
  });

  it('rejects a malformed /init', async () => {
    expect((await initEnvd({ defaultUser: 'no-such-user-here' })).status).toBe(400);
    const bad = await fetch(`${ENVD_URL}/init`, { method: 'POST', body: '[' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: 400, message: expect.stringMatching(/JSON/) });
  });
});
