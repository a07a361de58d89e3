import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient } from '../../src/client/api.js';
import {
  followBuild,
  requestBuild,
  resolveTemplateId,
  triggerBuild,
  uploadStepFiles,
} from '../../src/client/builds.js';
import type { BuildLogEntry } from '../../src/client/types.js';
import { collectCopySources, filesHash } from '../../src/lib/build-context.js';

/**
 * The client side of E2B's template build API against a stub server on loopback: what the CLI
 * sends for `pull`/`build`, and how it follows the build's status and logs.
 */
interface Seen {
  method: string;
  url: string;
  key: string | undefined;
  body: Buffer;
}

let server: Server;
let base: string;
let dir: string;
const seen: Seen[] = [];
let polls = 0;

const read = async (req: IncomingMessage) => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
};

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const body = await read(req);
    seen.push({
      method: req.method!,
      url: req.url!,
      key: req.headers['x-api-key'] as string | undefined,
      body,
    });
    const json = (status: number, v: unknown) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(v));
    const url = new URL(req.url!, 'http://x');
    if (req.method === 'POST' && url.pathname === '/v3/templates')
      return json(202, {
        templateID: 'tpl1',
        buildID: 'b1',
        names: ['demo'],
        tags: [],
        aliases: ['demo'],
        public: false,
      });
    if (req.method === 'GET' && url.pathname.startsWith('/templates/tpl1/files/'))
      return json(201, { present: false, url: `${base}/upload/${url.pathname.split('/').pop()}` });
    if (req.method === 'PUT' && url.pathname.startsWith('/upload/')) return res.writeHead(200).end();
    if (req.method === 'POST' && url.pathname === '/v2/templates/tpl1/builds/b1') return json(202, {});
    if (req.method === 'GET' && url.pathname === '/templates/tpl1/builds/b1/status') {
      const offset = Number(url.searchParams.get('logsOffset'));
      polls++;
      const all = ['pulling', 'step 1', 'done'].map((m, i) => ({
        timestamp: new Date(i * 1000).toISOString(),
        level: 'info',
        message: m,
      }));
      const visible = all.slice(0, Math.min(polls, 3));
      return json(200, {
        templateID: 'tpl1',
        buildID: 'b1',
        status: polls >= 3 ? 'ready' : 'building',
        logEntries: visible.slice(offset),
        logs: [],
      });
    }
    if (url.pathname === '/templates/aliases/demo') return json(200, { templateID: 'tpl1', public: false });
    json(404, { code: 404, message: `no route for ${req.method} ${url.pathname}` });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  dir = await mkdtemp(path.join(tmpdir(), 'aenv-build-ctx-'));
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  await rm(dir, { recursive: true, force: true });
});

describe('template build client', () => {
  it('registers, uploads COPY files once by hash, triggers and follows the build', async () => {
    const api = new ApiClient({ url: base, apiKey: 'e2b_k', source: 'env' });
    await mkdir(path.join(dir, 'app', 'node_modules'), { recursive: true });
    await writeFile(path.join(dir, 'app', 'main.py'), 'print(1)\n');
    await writeFile(path.join(dir, 'app', 'node_modules', 'big.js'), 'x');
    const files = await collectCopySources(dir, 'app', [/^node_modules$/, /^app\/node_modules$/]);
    expect(files.map((f) => f.rel)).toEqual(['app', 'app/main.py']);
    const hash = await filesHash('app', '/srv/', files);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(await filesHash('app', '/other/', files)).not.toBe(hash);

    const req = await requestBuild(api, { name: 'demo', cpuCount: 2 });
    expect(req).toMatchObject({ templateID: 'tpl1', buildID: 'b1' });
    expect(await uploadStepFiles(api, 'tpl1', hash, files)).toBe(true);
    await triggerBuild(api, 'tpl1', 'b1', {
      fromImage: 'python:3.12',
      force: false,
      steps: [{ type: 'COPY', args: ['app', '/srv/', '', ''], force: false, filesHash: hash }],
    });
    const logs: BuildLogEntry[] = [];
    const statuses: string[] = [];
    const final = await followBuild(
      api,
      'tpl1',
      'b1',
      { onLog: (e) => logs.push(e), onStatus: (s) => statuses.push(s) },
      1,
    );
    expect(final.status).toBe('ready');
    expect(logs.map((l) => l.message)).toEqual(['pulling', 'step 1', 'done']);
    expect(statuses[0]).toBe('building');

    expect(JSON.parse(seen.find((s) => s.url === '/v3/templates')!.body.toString())).toEqual({
      name: 'demo',
      cpuCount: 2,
    });
    const put = seen.find((s) => s.method === 'PUT')!;
    expect(put.url).toBe(`/upload/${hash}`);
    expect(put.key).toBe('e2b_k');
    const tar = gunzipSync(put.body);
    expect(tar.subarray(0, 4).toString()).toBe('app/');
    expect(tar.includes(Buffer.from('print(1)\n'))).toBe(true);
    expect(tar.includes(Buffer.from('big.js'))).toBe(false);
    const trigger = JSON.parse(seen.find((s) => s.url === '/v2/templates/tpl1/builds/b1')!.body.toString());
    expect(trigger).toMatchObject({ fromImage: 'python:3.12', steps: [{ type: 'COPY', filesHash: hash }] });
    expect(
      seen
        .filter((s) => s.url.includes('/status'))
        .map((s) => new URL(s.url, base).searchParams.get('logsOffset')),
    ).toEqual(['0', '1', '2', '3']);
  });

  it('resolves names through the alias endpoint and explains missing endpoints', async () => {
    const api = new ApiClient({ url: base, apiKey: 'e2b_k', source: 'env' });
    expect(await resolveTemplateId(api, 'demo')).toBe('tpl1');
    expect(await resolveTemplateId(api, 'raw-id')).toBe('raw-id');
    await expect(api.get('/templates', { feature: 'templates (GET /templates)' })).rejects.toThrow(
      /does not support templates \(GET \/templates\) yet \(HTTP 404/,
    );
  });
});
