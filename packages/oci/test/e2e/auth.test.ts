import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageStore, OciError } from '../../src/index.js';
import {
  BUSYBOX,
  baseLayer,
  imageBlobs,
  ociImage,
  skopeoPush,
  writeLayout,
  type TestImage,
  startRegistry,
  startTokenServer,
  TEST_PASS,
  TEST_USER,
  type TestRegistry,
  type TokenServer,
} from '@agentenv/test-support/oci';

let work: string;
let image: TestImage;
let layout: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'aenv-oci-auth-'));
  image = ociImage([await baseLayer()], { cmd: ['/bin/sh'] });
  layout = join(work, 'layout');
  await writeLayout(layout, [{ tag: 'img', top: image.manifest, blobs: imageBlobs(image) }]);
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

async function rejected(p: Promise<unknown>): Promise<OciError> {
  const e = await p.then(
    () => new Error('expected a failure'),
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(OciError);
  return e as OciError;
}

describe('basic auth (htpasswd)', () => {
  let reg: TestRegistry;
  beforeAll(async () => {
    reg = await startRegistry({ kind: 'htpasswd' });
    await skopeoPush(layout, 'img', `${reg.host}/private/img:1`, { creds: `${TEST_USER}:${TEST_PASS}` });
  });
  afterAll(async () => reg?.stop());

  it('pulls with credentials given as options', async () => {
    const home = await mkdtemp(join(work, 'home-'));
    const img = await new ImageStore({ home, authFile: join(work, 'none.json') }).pull(
      `${reg.host}/private/img:1`,
      {
        credentials: { username: TEST_USER, password: TEST_PASS },
      },
    );
    expect(img.digest).toBe(image.manifest.digest);
    expect((await readFile(join(img.layers[0]!, 'bin/busybox'))).equals(await readFile(BUSYBOX))).toBe(true);
  });

  it('pulls with credentials from a docker config.json', async () => {
    const authFile = join(work, 'config.json');
    const auth = Buffer.from(`${TEST_USER}:${TEST_PASS}`).toString('base64');
    await writeFile(authFile, JSON.stringify({ auths: { [`http://${reg.host}`]: { auth } } }));
    const img = await new ImageStore({ home: await mkdtemp(join(work, 'home-')), authFile }).pull(
      `${reg.host}/private/img:1`,
    );
    expect(img.digest).toBe(image.manifest.digest);
  });

  it('refuses without or with wrong credentials', async () => {
    const store = new ImageStore({
      home: await mkdtemp(join(work, 'home-')),
      authFile: join(work, 'none.json'),
    });
    const anon = await rejected(store.pull(`${reg.host}/private/img:1`));
    expect(anon.code).toBe('unauthorized');
    expect(anon.message).toMatch(/requires credentials/);
    const wrong = await rejected(
      store.pull(`${reg.host}/private/img:1`, { credentials: { username: TEST_USER, password: 'nope' } }),
    );
    expect(wrong.code).toBe('unauthorized');
    expect(wrong.message).toMatch(/denied for the given credentials/);
  });
});

describe('bearer token auth (WWW-Authenticate: Bearer realm, service, scope)', () => {
  let tokens: TokenServer;
  let reg: TestRegistry;
  beforeAll(async () => {
    tokens = await startTokenServer();
    reg = await startRegistry({ kind: 'token', tokenServer: tokens });
    await skopeoPush(layout, 'img', `${reg.host}/private/img:1`, { creds: `${TEST_USER}:${TEST_PASS}` });
  });
  afterAll(async () => {
    await reg?.stop();
    await tokens?.stop();
  });

  it('fetches a token with the credentials and the pull scope, then pulls', async () => {
    const before = tokens.requests.length;
    const img = await new ImageStore({
      home: await mkdtemp(join(work, 'home-')),
      authFile: join(work, 'none.json'),
    }).pull(`${reg.host}/private/img:1`, { credentials: { username: TEST_USER, password: TEST_PASS } });
    expect(img.digest).toBe(image.manifest.digest);
    const mine = tokens.requests.slice(before);
    expect(mine.every((r) => r.authorized)).toBe(true);
    expect(mine[0]?.scopes).toContain('repository:private/img:pull');
    // one token serves the manifest, the config and the layer
    expect(mine).toHaveLength(1);
  });

  it('reports the token server refusing anonymous access', async () => {
    const e = await rejected(
      new ImageStore({ home: await mkdtemp(join(work, 'home-')), authFile: join(work, 'none.json') }).pull(
        `${reg.host}/private/img:1`,
      ),
    );
    expect(e.code).toBe('unauthorized');
    expect(e.message).toMatch(/refused anonymous access/);
  });
});
