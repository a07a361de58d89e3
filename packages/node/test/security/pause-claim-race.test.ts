/**
 * Two real nodes share an S3 repository (s3rver). A reaches it through a relay the test can
 * stall, so A's pause upload can be held before it commits; B reaches it directly. While the
 * upload is held and as it lands, B is asked to connect again and again and A is asked once:
 * exactly one node ends up running the sandbox. Then a pause that A stored holds neither the
 * sandbox's env vars nor its tokens in S3's bytes, and B takes it over with them.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { writeS3RepositoryConfig } from '@agentenv/test-support/snapshot';
import {
  API_KEY,
  localCaptures,
  nearInstance,
  startServer,
  URL_BASE,
  urlOf,
  useS3BehindRelay,
  type TestServer,
} from '@agentenv/test-support/server';
import { resetNode } from '../p2p/helpers.js';

/** The relay's port (helper 7's range); A reaches S3 only through it. */
const RELAY_PORT = 22701;
const PREFIX = 'pause-race-test';
const B = nearInstance(1);
const B_URL = urlOf(B);
const SECRET_ENV = { SERVICE_API_KEY: 'sk-race-test-5f1e2d3c4b5a69788796' };

/** A call to one node's API. */
async function call(base: string, method: string, route: string, body?: unknown) {
  const r = await fetch(`${base}${route}`, {
    method,
    headers: { 'x-api-key': API_KEY, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

const connect = (base: string, id: string) =>
  call(base, 'POST', `/sandboxes/${id}/connect`, { timeout: 120 });
const stateOn = async (base: string, id: string) => {
  const r = await call(base, 'GET', `/sandboxes/${id}`);
  return r.status === 200 ? (r.json.state as string) : r.status;
};

/**
 * Every object s3rver keeps but the blobs, as text: records, claims, aliases. (The blobs hold the
 * capture, the sandbox's memory as it was, its processes' secrets included.)
 */
function s3Objects(dir: string): string {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && !e.parentPath.split(path.sep).includes('blobs'))
    .map((e) => readFileSync(path.join(e.parentPath, e.name)).toString('latin1'))
    .join('\n');
}

/** Until the pause upload that was held has been dropped as obsolete (A's repository deletes). */
async function untilDeleted(
  s3: { requests(): Promise<Record<string, number>> },
  before: number,
  each: () => Promise<void>,
) {
  const deadline = Date.now() + 60_000;
  while (((await s3.requests())['DELETE other'] ?? 0) <= before) {
    if (Date.now() > deadline) throw new Error('the held pause upload was not dropped within 60 s');
    await each();
  }
}

describe('a pause upload racing connects on two nodes', () => {
  const ctx = useS3BehindRelay({ relayPort: RELAY_PORT, prefix: PREFIX });
  const dir = mkdtempSync(path.join(tmpdir(), 'aenv-pause-race-'));
  let nodeB: TestServer | undefined;

  beforeAll(async () => {
    resetNode(B);
    ctx.server = await startServer(ctx.env());
    const config = writeS3RepositoryConfig(path.join(dir, 'b.toml'), {
      endpoint: ctx.s3.endpoint,
      bucket: ctx.s3.bucket,
      prefix: PREFIX,
    });
    nodeB = await startServer({ AENV_CONFIG_PATH: config, AENV_POOL_SIZE: '0' }, B);
  });
  afterAll(async () => {
    ctx.relay.flow();
    const list = await call(B_URL, 'GET', '/v2/sandboxes?limit=100').catch(() => undefined);
    for (const s of (list?.json as unknown as { sandboxID: string }[] | undefined) ?? [])
      await call(B_URL, 'DELETE', `/sandboxes/${s.sandboxID}`);
    await nodeB?.stop();
    resetNode(B);
    rmSync(dir, { recursive: true, force: true });
  });

  it('ends with the sandbox running on exactly one node', async () => {
    const sbx = await Sandbox.create({ envs: SECRET_ENV });
    await sbx.files.write('/tmp/mark', 'from-a');
    const id = sbx.sandboxId;

    ctx.relay.stall();
    expect((await call(URL_BASE, 'POST', `/sandboxes/${id}/pause`)).status).toBe(204);
    await eventually(() => expect(ctx.relay.held).toBeGreaterThan(0));
    // Held before the commit: nothing B could take.
    expect((await connect(B_URL, id)).status).toBe(404);

    // A resumes while the upload gets going again, lands (claimed by A) and is dropped as
    // obsolete once A runs the sandbox; B keeps asking all along.
    const deletes = (await ctx.s3.requests())['DELETE other'] ?? 0;
    const onA = connect(URL_BASE, id);
    ctx.relay.flow();
    const asked: number[] = [];
    const askB = async () => void asked.push((await connect(B_URL, id)).status);
    await untilDeleted(ctx.s3, deletes, askB);
    const a = (await onA).status;
    await askB();

    const running = [await stateOn(URL_BASE, id), await stateOn(B_URL, id)].filter((s) => s === 'running');
    expect(running, `A answered ${a}, B answered ${asked.join(',')}`).toHaveLength(1);
    // A asked during the upload resumes its local capture; B never had it.
    expect(a).toBe(201);
    expect(asked.every((s) => s === 404)).toBe(true);
    const back = await Sandbox.connect(id);
    expect(await back.files.read('/tmp/mark')).toBe('from-a');
    await back.kill();
  });

  it('stores the pause without its env vars and tokens; B takes it over with them', async () => {
    const sbx = await Sandbox.create({ envs: SECRET_ENV, secure: true });
    const id = sbx.sandboxId;
    const before = await call(URL_BASE, 'GET', `/sandboxes/${id}`);
    const token = before.json.envdAccessToken as string;
    expect(token).toBeTruthy();
    expect((await call(URL_BASE, 'POST', `/sandboxes/${id}/pause`)).status).toBe(204);
    // Stored, not only without a local capture: the capture itself follows the pause's answer.
    await eventually(
      async () => expect((await call(URL_BASE, 'GET', `/sandboxes/${id}`)).json.pauseStored).toBe(true),
      { timeoutMs: 60_000 },
    );
    await eventually(() => expect(localCaptures(id)).toEqual([]), { timeoutMs: 60_000 });

    const bytes = s3Objects(ctx.s3.dir);
    expect(bytes).toContain(id);
    for (const secret of [...Object.values(SECRET_ENV), token]) expect(bytes.includes(secret)).toBe(false);

    const taken = await connect(B_URL, id);
    expect(taken.status).toBe(201);
    expect(taken.json.envdAccessToken).toBe(token);
    // A learns it at its next connect: another node claimed the pause.
    expect((await connect(URL_BASE, id)).status).toBe(404);
    expect(await stateOn(URL_BASE, id)).toBe(404);
    const onB = await Sandbox.connect(id, { apiUrl: B_URL, sandboxUrl: B_URL });
    expect((await onB.commands.run('echo $SERVICE_API_KEY')).stdout.trim()).toBe(SECRET_ENV.SERVICE_API_KEY);
    await onB.kill();
  });
});
