import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageStore, OciError } from '../../src/index.js';
import {
  freePort,
  startFakeRegistry,
  type FakeRegistry,
  ociImage,
  randomLayer,
  sha256,
  tarOf,
  type TestImage,
} from '@agentenv/test-support/oci';

let fake: FakeRegistry;
let work: string;
let good: TestImage;

/** Publishes an image (manifest under repo:tag and by digest, its blobs) on the fake registry. */
function publish(repo: string, tag: string, img: TestImage): void {
  const m = { body: img.manifest.data, mediaType: img.manifest.mediaType };
  fake.manifests.set(`${repo}:${tag}`, m);
  fake.manifests.set(img.manifest.digest, m);
  for (const b of [img.config, ...img.layers]) fake.blobs.set(b.digest, b.data);
}

async function home(): Promise<string> {
  return mkdtemp(join(work, 'home-'));
}

/** Nothing of a failed pull may remain: no layer directory, no temporary, no layer blob. */
async function assertNothingKept(h: string, img: TestImage): Promise<void> {
  const layers = await readdir(join(h, 'layers')).catch(() => [] as string[]);
  expect(layers.filter((n) => n.startsWith('oci-') || n.startsWith('.tmp'))).toEqual([]);
  const blobs = await readdir(join(h, 'images', 'blobs', 'sha256')).catch(() => [] as string[]);
  expect(blobs.filter((n) => n.includes('.tmp'))).toEqual([]);
  for (const l of img.layers) expect(blobs).not.toContain(l.digest.slice(7));
}

async function failure(p: Promise<unknown>, code: string, text?: RegExp): Promise<OciError> {
  const e = await p.then(
    () => new Error('expected a failure'),
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(OciError);
  expect((e as OciError).code).toBe(code);
  if (text) expect((e as Error).message).toMatch(text);
  return e as OciError;
}

const fastRetry = { attempts: 3, baseDelayMs: 20, maxDelayMs: 100 };

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'aenv-oci-faults-'));
  fake = await startFakeRegistry();
  good = ociImage([await tarOf([{ name: 'hello', content: 'hello\n' }]), await randomLayer(256 << 10)]);
  publish('fake/good', '1', good);
});

afterAll(async () => {
  await fake?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('integrity', () => {
  it('rejects a layer blob whose bytes do not match its digest, keeping nothing', async () => {
    const img = ociImage([await tarOf([{ name: 'x', content: 'the real content\n' }])]);
    publish('fake/badblob', '1', img);
    const layer = img.layers[0]!;
    const tampered = Buffer.from(layer.data);
    tampered[tampered.length - 5]! ^= 0xff;
    fake.corrupt(layer.digest, tampered);
    const h = await home();
    await failure(
      new ImageStore({ home: h, retry: fastRetry }).pull(`${fake.host}/fake/badblob:1`),
      'digest_mismatch',
      new RegExp(`hash to sha256:[0-9a-f]{64}, not ${layer.digest}; rejected`),
    );
    await assertNothingKept(h, img);
  });

  it('rejects a layer whose uncompressed content does not match the config diff id', async () => {
    const real = ociImage([await tarOf([{ name: 'x', content: 'one\n' }])]);
    const other = await tarOf([{ name: 'x', content: 'two\n' }]);
    // a manifest + config claiming layer `other`'s diff id for `real`'s blob
    const lying = ociImage([other]);
    const gz = real.layers[0]!;
    const config = Buffer.from(lying.config.data.toString().replace(lying.diffIds[0]!, sha256(other)));
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: lying.config.mediaType, digest: sha256(config), size: config.length },
        layers: [{ mediaType: gz.mediaType, digest: gz.digest, size: gz.size }],
      }),
    );
    fake.manifests.set('fake/baddiff:1', {
      body: manifest,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
    });
    fake.blobs.set(sha256(config), config);
    fake.blobs.set(gz.digest, gz.data);
    const h = await home();
    await failure(
      new ImageStore({ home: h }).pull(`${fake.host}/fake/baddiff:1`),
      'digest_mismatch',
      /uncompressed content hashes to .* but the image config says/,
    );
    await assertNothingKept(h, real);
  });

  it('rejects a manifest whose bytes do not match the digest asked for', async () => {
    const wrong = `sha256:${'ab'.repeat(32)}`;
    fake.manifests.set(wrong, { body: good.manifest.data, mediaType: good.manifest.mediaType });
    await failure(
      new ImageStore({ home: await home() }).pull(`${fake.host}/fake/good@${wrong}`),
      'digest_mismatch',
      /manifest bytes hash to/,
    );
  });

  it('refuses a layer that would write outside its directory', async () => {
    const evil = ociImage([
      await tarOf([
        { name: 'link', type: 'symlink', linkname: '/tmp' },
        { name: 'link/owned', content: 'x' },
      ]),
    ]);
    publish('fake/evil', '1', evil);
    const h = await home();
    await failure(
      new ImageStore({ home: h }).pull(`${fake.host}/fake/evil:1`),
      'unsafe_layer',
      /symlink link/,
    );
    await assertNothingKept(h, evil);
  });
});

describe('manifest formats', () => {
  it('selects from a Docker manifest list', async () => {
    const amd = ociImage([await tarOf([{ name: 'arch', content: 'amd64' }])]);
    const arm = ociImage([await tarOf([{ name: 'arch', content: 'arm64' }])], { architecture: 'arm64' });
    const toDocker = (img: TestImage) => {
      const doc = JSON.parse(img.manifest.data.toString()) as Record<string, unknown>;
      doc.mediaType = 'application/vnd.docker.distribution.manifest.v2+json';
      const body = Buffer.from(JSON.stringify(doc));
      return { body, digest: sha256(body) };
    };
    const list: Record<string, unknown> = {
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.list.v2+json',
      manifests: [] as unknown[],
    };
    for (const [img, arch] of [
      [arm, 'arm64'],
      [amd, 'amd64'],
    ] as const) {
      const d = toDocker(img);
      fake.manifests.set(d.digest, {
        body: d.body,
        mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      });
      for (const b of [img.config, ...img.layers]) fake.blobs.set(b.digest, b.data);
      (list.manifests as unknown[]).push({
        mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
        digest: d.digest,
        size: d.body.length,
        platform: { os: 'linux', architecture: arch },
      });
    }
    fake.manifests.set('fake/list:1', {
      body: Buffer.from(JSON.stringify(list)),
      mediaType: 'application/vnd.docker.distribution.manifest.list.v2+json',
    });
    const img = await new ImageStore({ home: await home() }).pull(`${fake.host}/fake/list:1`, {
      platform: 'linux/amd64',
    });
    expect(img.platform.architecture).toBe('amd64');
    expect(img.layerIds).toEqual([`oci-${amd.diffIds[0]!.replace(':', '-')}`]);
  });

  it('drops the layers below one that is opaque at its root, and repeated layers', async () => {
    const one = await tarOf([{ name: 'a', content: 'a' }]);
    const reset = await tarOf([{ name: '.wh..wh..opq' }, { name: 'b', content: 'b' }]);
    const img = ociImage([one, reset, one]);
    publish('fake/reset', '1', img);
    const out = await new ImageStore({ home: await home() }).pull(`${fake.host}/fake/reset:1`);
    const id = (t: Buffer) => `oci-${sha256(t).replace(':', '-')}`;
    expect(out.layerIds).toEqual([id(reset), id(one)]);
  });

  it('refuses schema 1 manifests with a clear message', async () => {
    fake.manifests.set('fake/old:1', {
      body: Buffer.from(JSON.stringify({ schemaVersion: 1, name: 'fake/old', tag: '1', fsLayers: [] })),
      mediaType: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
    });
    await failure(
      new ImageStore({ home: await home() }).pull(`${fake.host}/fake/old:1`),
      'unsupported',
      /schema 1/,
    );
  });
});

describe('network faults', () => {
  it('retries 503s with back-off and then succeeds', async () => {
    fake.failNext(2);
    const retries: number[] = [];
    const img = await new ImageStore({ home: await home(), retry: fastRetry }).pull(
      `${fake.host}/fake/good:1`,
      {
        onRetry: (r) => retries.push(r.attempt),
      },
    );
    expect(img.digest).toBe(good.manifest.digest);
    expect(retries).toEqual([1, 2]);
  });

  it('gives up on a registry that keeps failing, after the configured attempts', async () => {
    fake.failNext(100);
    try {
      const e = await failure(
        new ImageStore({ home: await home(), retry: fastRetry }).pull(`${fake.host}/fake/good:1`),
        'registry_error',
        /failed 3 times, last: HTTP 503/,
      );
      expect(e.message).toContain(fake.host);
    } finally {
      fake.failNext(0);
    }
  });

  it('resumes an interrupted layer download with a Range request', async () => {
    const layer = good.layers[1]!;
    fake.cutOnce(layer.digest, 100_000);
    const before = fake.ranges.length;
    const img = await new ImageStore({ home: await home(), retry: fastRetry }).pull(
      `${fake.host}/fake/good:1`,
    );
    expect(img.layers).toHaveLength(2);
    // The download resumes from the bytes it had written when the cut surfaced. That can be fewer
    // than the registry sent: a premature close ends the response stream with the chunks still
    // buffered in it unread, so the offset is anywhere in (0, 100000], never a restart at 0.
    const resumedAt = fake.ranges
      .slice(before)
      .flatMap((range) => /^bytes=(\d+)-$/.exec(range ?? '')?.slice(1) ?? [])
      .map(Number);
    expect(resumedAt).toHaveLength(1);
    expect(resumedAt[0]).toBeGreaterThan(0);
    expect(resumedAt[0]).toBeLessThanOrEqual(100_000);
  });

  it('follows blob redirects without leaking credentials to the other host', async () => {
    const seen: (string | undefined)[] = [];
    const cdn = http.createServer((req, res) => {
      seen.push(req.headers.authorization);
      const digest = (req.url ?? '').split('/').pop() ?? '';
      const body = fake.blobs.get(digest);
      res.writeHead(body ? 200 : 404, body ? { 'content-length': body.length } : {});
      res.end(body);
    });
    await new Promise<void>((r) => cdn.listen(0, '127.0.0.1', r));
    const auth = `Basic ${Buffer.from('u:p').toString('base64')}`;
    fake.requireAuth(auth);
    // The registry's own host on another port: plain http and a loopback address are followed.
    fake.redirectBlobs(`http://127.0.0.1:${(cdn.address() as AddressInfo).port}`);
    try {
      const img = await new ImageStore({ home: await home(), authFile: join(work, 'none.json') }).pull(
        `${fake.host}/fake/good:1`,
        { credentials: { username: 'u', password: 'p' } },
      );
      expect(img.layers).toHaveLength(2);
      expect(seen.length).toBeGreaterThanOrEqual(3); // config + 2 layers
      expect(seen.every((h) => h === undefined)).toBe(true);
    } finally {
      fake.requireAuth(null);
      fake.redirectBlobs(null);
      cdn.closeAllConnections();
      await new Promise<void>((r) => cdn.close(() => r()));
    }
  });

  it.each([
    ['another host over plain http', 'http://localhost:1', /only asked over https/],
    ['the metadata service', 'https://169.254.169.254', /link-local address is never asked/],
    ['a private address', 'https://10.1.2.3', /private address other than the registry's own/],
  ])('refuses a blob redirect to %s, asking nothing of it', async (_what, base, reason) => {
    fake.redirectBlobs(base);
    try {
      const e = await failure(
        new ImageStore({ home: await home(), retry: fastRetry }).pull(`${fake.host}/fake/good:1`),
        'unauthorized',
        reason,
      );
      expect(e.message).toContain(`redirected to ${base}/`);
    } finally {
      fake.redirectBlobs(null);
    }
  });

  it('reports a registry that is down, after bounded retries', async () => {
    const port = await freePort();
    const retries: number[] = [];
    const t = Date.now();
    const e = await failure(
      new ImageStore({ home: await home(), retry: fastRetry }).pull(`127.0.0.1:${port}/fake/good:1`, {
        onRetry: (r) => retries.push(r.attempt),
      }),
      'registry_unavailable',
      new RegExp(`registry 127.0.0.1:${port} unreachable: .* failed 3 times, last: .*ECONNREFUSED`),
    );
    expect(Date.now() - t).toBeLessThan(5000);
    expect(retries).toEqual([1, 2]);
    expect(e.message).toContain('fake/good:1');
  });

  it('unpacks zstd-compressed layers', async () => {
    const { execFileSync } = await import('node:child_process');
    const t = await tarOf([{ name: 'z', content: 'zstd layer\n' }]);
    const img = ociImage([t]);
    const zst = execFileSync('zstd', ['-q', '-c'], { input: t });
    const config = img.config;
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: config.mediaType, digest: config.digest, size: config.size },
        layers: [
          { mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd', digest: sha256(zst), size: zst.length },
        ],
      }),
    );
    fake.manifests.set('fake/zstd:1', {
      body: manifest,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
    });
    fake.blobs.set(config.digest, config.data);
    fake.blobs.set(sha256(zst), zst);
    const out = await new ImageStore({ home: await home() }).pull(`${fake.host}/fake/zstd:1`);
    expect(out.layerIds[0]).toBe(`oci-${img.diffIds[0]!.replace(':', '-')}`);
    // and the same layer, gzip-compressed, is the same directory (keyed by diff id)
    expect(gzipSync(t).length).toBeGreaterThan(0);
  });
});
