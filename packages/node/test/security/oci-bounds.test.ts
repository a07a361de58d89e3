import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_UNPACK_LIMITS, ImageStore, OciError, type UnpackLimits } from '@agentenv/oci';
import {
  ociImage,
  startFakeRegistry,
  tarOf,
  type FakeRegistry,
  type TestImage,
} from '@agentenv/test-support/oci';

const MiB = 2 ** 20;
let fake: FakeRegistry;
let work: string;

function publish(repo: string, img: TestImage): string {
  const m = { body: img.manifest.data, mediaType: img.manifest.mediaType };
  fake.manifests.set(`${repo}:1`, m);
  fake.manifests.set(img.manifest.digest, m);
  for (const b of [img.config, ...img.layers]) fake.blobs.set(b.digest, b.data);
  return `${fake.host}/${repo}:1`;
}

async function refusal(reference: string, limits: Partial<UnpackLimits> = {}): Promise<OciError> {
  const home = await mkdtemp(join(work, 'home-'));
  const store = new ImageStore({
    home,
    unpackLimits: { ...DEFAULT_UNPACK_LIMITS, ...limits },
    retry: { attempts: 1 },
  });
  const err = await store.pull(reference).then(
    () => new Error('the pull succeeded'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OciError);
  // Nothing of a refused layer is kept.
  const layers = await readdir(join(home, 'layers')).catch(() => [] as string[]);
  expect(layers.filter((n) => n.startsWith('.tmp'))).toEqual([]);
  return err as OciError;
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'aenv-oci-bounds-'));
  fake = await startFakeRegistry();
});

afterAll(async () => {
  await fake?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('an image pull is bounded in what it unpacks', () => {
  it('refuses a gzip bomb layer by its uncompressed size', async () => {
    const img = ociImage([await tarOf([{ name: 'zeros', content: Buffer.alloc(32 * MiB) }])]);
    expect(img.layers[0]!.size).toBeLessThan(MiB);
    const err = await refusal(publish('bounds/bomb', img), { layerBytes: 4 * MiB });
    expect(err.code).toBe('over_limit');
    expect(err.message).toMatch(
      /layer sha256:[0-9a-f]+ of .*bounds\/bomb:1 has more than 4\.0 MiB uncompressed/,
    );
    expect(err.message).toMatch(/max_layer_mb/);
  });

  it('refuses an image whose layers hold more entries than an image may', async () => {
    const files = (p: string) => Array.from({ length: 60 }, (_, i) => ({ name: `${p}${i}`, content: 'x' }));
    const img = ociImage([await tarOf(files('a')), await tarOf(files('b'))]);
    const reference = publish('bounds/many', img);
    const err = await refusal(reference, { imageEntries: 100 });
    expect(err.code).toBe('over_limit');
    expect(err.message).toMatch(/bounds\/many:1 has more than 100 entries in its layers .*max_image_entries/);
    const layer = await refusal(reference, { layerEntries: 50 });
    expect(layer.message).toMatch(/has more than 50 entries .*max_layer_entries/);
  });
});

describe("a registry's token realm", () => {
  let server: http.Server;
  let realm = '';
  let host = '';
  beforeAll(async () => {
    server = http.createServer((_req, res) => {
      res.writeHead(401, { 'www-authenticate': `Bearer realm="${realm}",service="x"` });
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('is not asked when it is link-local, or a private address other than the registry', async () => {
    realm = 'http://169.254.169.254/latest/meta-data/iam';
    const metadata = await refusal(`${host}/any/image:1`);
    expect(metadata.code).toBe('unauthorized');
    expect(metadata.message).toMatch(
      /bad token realm http:\/\/169\.254\.169\.254.*link-local address is never asked/,
    );
    realm = 'https://10.0.0.1/token';
    expect((await refusal(`${host}/any/image:1`)).message).toMatch(/private address other than the registry/);
  });
});
