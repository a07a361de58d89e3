import { execFile } from 'node:child_process';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageStore, LayerCacheFullError, OciError, type PullProgress } from '../../src/index.js';
import { diskUsage } from '../../src/cache.js';
import {
  BUSYBOX,
  baseLayer,
  imageBlobs,
  ociImage,
  ociIndex,
  randomLayer,
  skopeoPush,
  tarOf,
  topLayer,
  whiteoutLayer,
  writeLayout,
  type TestImage,
  startRegistry,
  type TestRegistry,
} from '@agentenv/test-support/oci';

const run = promisify(execFile);

let reg: TestRegistry;
let work: string;
let busybox: TestImage;
let app: TestImage;
const homes: string[] = [];

async function freshHome(): Promise<string> {
  const h = await mkdtemp(join(work, 'home-'));
  homes.push(h);
  return h;
}

async function ociLayerDirs(home: string): Promise<string[]> {
  return (await readdir(join(home, 'layers')).catch(() => [] as string[])).filter((n) =>
    n.startsWith('oci-'),
  );
}

async function leftovers(home: string): Promise<string[]> {
  const layerTmp = (await readdir(join(home, 'layers')).catch(() => [] as string[])).filter((n) =>
    n.startsWith('.tmp'),
  );
  const blobs = await readdir(join(home, 'images', 'blobs', 'sha256')).catch(() => [] as string[]);
  return [...layerTmp, ...blobs.filter((n) => n.includes('.tmp'))];
}

async function expectOciError(p: Promise<unknown>, code: string, text?: RegExp): Promise<OciError> {
  const e = await p.then(
    () => {
      throw new Error('expected the pull to fail');
    },
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(OciError);
  expect((e as OciError).code).toBe(code);
  if (text) expect((e as Error).message).toMatch(text);
  return e as OciError;
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'aenv-oci-pull-'));
  reg = await startRegistry();
  const base = await baseLayer();
  busybox = ociImage([base, await whiteoutLayer(), await topLayer()], {
    env: ['PATH=/usr/bin:/bin', 'GREETING=hi there'],
    cmd: ['/bin/sh', '-c', 'cat /etc/hello'],
    entrypoint: ['/bin/busybox'],
    workingDir: '/home/user',
    user: '1000:1000',
  });
  app = ociImage([base, await tarOf([{ name: 'app/main.sh', content: 'echo app\n', mode: 0o755 }])], {
    cmd: ['/app/main.sh'],
  });
  const arm = ociImage([await tarOf([{ name: 'arch', content: 'arm64\n' }])], {
    architecture: 'arm64',
    variant: 'v8',
  });
  const ppc = ociImage([await tarOf([{ name: 'arch', content: 'ppc64le\n' }])], { architecture: 'ppc64le' });
  const multi = ociIndex([
    { image: arm, platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } },
    { image: app, platform: { os: 'linux', architecture: 'amd64' } },
  ]);
  const foreign = ociIndex([
    { image: arm, platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } },
    { image: ppc, platform: { os: 'linux', architecture: 'ppc64le' } },
  ]);
  const layout = join(work, 'layout');
  await writeLayout(layout, [
    { tag: 'busybox', top: busybox.manifest, blobs: imageBlobs(busybox) },
    { tag: 'app', top: app.manifest, blobs: imageBlobs(app) },
    { tag: 'multi', top: multi, blobs: [arm.manifest, app.manifest, ...imageBlobs(arm), ...imageBlobs(app)] },
    {
      tag: 'foreign',
      top: foreign,
      blobs: [arm.manifest, ppc.manifest, ...imageBlobs(arm), ...imageBlobs(ppc)],
    },
  ]);
  await skopeoPush(layout, 'busybox', `${reg.host}/test/busybox:1`);
  await skopeoPush(layout, 'busybox', `${reg.host}/test/busybox-docker:1`, { format: 'v2s2' });
  await skopeoPush(layout, 'app', `${reg.host}/test/app:1`);
  await skopeoPush(layout, 'multi', `${reg.host}/test/multi:1`, { all: true });
  await skopeoPush(layout, 'foreign', `${reg.host}/test/foreign:1`, { all: true });
});

afterAll(async () => {
  await reg?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('pull from a real registry (docker-registry on 127.0.0.1)', () => {
  it('pulls by tag: config, layers lowest first, progress per layer', async () => {
    const store = new ImageStore({ home: await freshHome() });
    const progress: PullProgress[] = [];
    const img = await store.pull(`${reg.host}/test/busybox:1`, { onProgress: (p) => progress.push(p) });
    expect(img.reference).toBe(`${reg.host}/test/busybox:1`);
    expect(img.digest).toBe(busybox.manifest.digest);
    expect(img.platform).toMatchObject({ os: 'linux', architecture: 'amd64' });
    expect(img.config).toMatchObject({
      env: ['PATH=/usr/bin:/bin', 'GREETING=hi there'],
      cmd: ['/bin/sh', '-c', 'cat /etc/hello'],
      entrypoint: ['/bin/busybox'],
      workingDir: '/home/user',
      user: '1000:1000',
    });
    expect(img.layers).toHaveLength(3);
    expect(img.layerIds).toEqual(busybox.diffIds.map((d) => `oci-${d.replace(':', '-')}`));
    expect(img.layers[0]).toBe(join(store.layers.root, img.layerIds[0]!, 'rootfs'));
    expect(img.downloadedBytes).toBe(img.compressedBytes);
    // the busybox binary arrived intact, with its mode
    const bin = join(img.layers[0]!, 'bin/busybox');
    expect((await readFile(bin)).equals(await readFile(BUSYBOX))).toBe(true);
    expect((await lstat(bin)).mode & 0o7777).toBe(0o755);
    expect((await lstat(join(img.layers[0]!, 'home/user/notes'))).uid).toBe(1000);
    expect((await lstat(join(img.layers[0]!, 'tmp'))).mode & 0o7777).toBe(0o1777);
    // progress: every layer reports its download to completion, then done
    for (const l of busybox.layers) {
      const mine = progress.filter((p) => p.layer === l.digest);
      expect(mine.at(-1)).toMatchObject({ phase: 'done', done: l.size, total: l.size, count: 3 });
      expect(mine.some((p) => p.phase === 'download' && p.done === l.size)).toBe(true);
    }
    expect(await leftovers(store.layers.root.replace(/\/layers$/, ''))).toEqual([]);
  });

  it('pulls by digest, and a second pull of the same image downloads nothing', async () => {
    const home = await freshHome();
    const store = new ImageStore({ home });
    const ref = `${reg.host}/test/busybox@${busybox.manifest.digest}`;
    const first = await store.pull(ref);
    expect(first.digest).toBe(busybox.manifest.digest);
    expect(first.reference).toBe(ref);
    const again = await new ImageStore({ home }).pull(`${reg.host}/test/busybox:1`);
    expect(again.downloadedBytes).toBe(0);
    expect(again.layers).toEqual(first.layers);
    // by digest, with everything local, the registry is not needed at all
    const offline = await new ImageStore({ home }).pull(
      `127.0.0.1:1/test/busybox@${busybox.manifest.digest}`,
    );
    expect(offline.layers).toEqual(first.layers);
  });

  it('pulls a Docker schema 2 manifest (skopeo --format v2s2)', async () => {
    const img = await new ImageStore({ home: await freshHome() }).pull(`${reg.host}/test/busybox-docker:1`);
    expect(img.layers).toHaveLength(3);
    expect(img.config.cmd).toEqual(['/bin/sh', '-c', 'cat /etc/hello']);
    expect(img.digest).not.toBe(busybox.manifest.digest);
  });

  it('stores whiteouts and opaque directories in overlayfs form', async () => {
    const img = await new ImageStore({ home: await freshHome() }).pull(`${reg.host}/test/busybox:1`);
    const l2 = img.layers[1]!;
    const wh = await lstat(join(l2, 'etc/removed.txt'));
    expect(wh.isCharacterDevice()).toBe(true);
    expect(wh.rdev).toBe(0);
    expect((await lstat(join(l2, 'data/old'))).isCharacterDevice()).toBe(true);
    const { stdout } = await run('getfattr', [
      '--absolute-names',
      '-n',
      'trusted.overlay.opaque',
      join(l2, 'opq'),
    ]);
    expect(stdout).toContain('trusted.overlay.opaque="y"');
    // no marker files are left in the layer
    expect(await readdir(join(l2, 'etc'))).not.toContain('.wh.removed.txt');
    expect(await readdir(join(l2, 'opq'))).toEqual(['upper.txt']);
  });

  it('selects the platform from an image index, and names the available ones when none fits', async () => {
    const store = new ImageStore({ home: await freshHome() });
    const amd = await store.pull(`${reg.host}/test/multi:1`);
    expect(amd.platform.architecture).toBe('amd64');
    expect(amd.digest).toBe(app.manifest.digest);
    expect(amd.indexDigest).toMatch(/^sha256:/);
    expect(amd.config.cmd).toEqual(['/app/main.sh']);
    const arm = await store.pull(`${reg.host}/test/multi:1`, { platform: 'linux/arm64' });
    expect(arm.platform).toMatchObject({ architecture: 'arm64', variant: 'v8' });
    expect(await readFile(join(arm.layers[0]!, 'arch'), 'utf8')).toBe('arm64\n');
    await expectOciError(
      store.pull(`${reg.host}/test/foreign:1`),
      'platform_mismatch',
      /no image for linux\/amd64; available platforms: linux\/arm64\/v8, linux\/ppc64le/,
    );
  });

  it('stores layers shared by two images once', async () => {
    const home = await freshHome();
    const store = new ImageStore({ home });
    const a = await store.pull(`${reg.host}/test/busybox:1`);
    const afterFirst = await diskUsage(join(home, 'layers'));
    const progress: PullProgress[] = [];
    const b = await store.pull(`${reg.host}/test/app:1`, { onProgress: (p) => progress.push(p) });
    expect(b.layers[0]).toBe(a.layers[0]);
    expect(await ociLayerDirs(home)).toHaveLength(4);
    expect(progress.filter((p) => p.index === 0).map((p) => p.phase)).toEqual(['cached']);
    expect(b.downloadedBytes).toBe(app.layers[1]!.size);
    // the second image only added its own small layer (the 1+ MB busybox layer is shared)
    const added = (await diskUsage(join(home, 'layers'))) - afterFirst;
    expect(added).toBeLessThan(64 * 1024);
    expect(store.cache.usage().layers).toBe(4);
  });

  it('concurrent pulls sharing layers download and unpack each layer once', async () => {
    const home = await freshHome();
    const store = new ImageStore({ home });
    const pulls = await Promise.all([
      store.pull(`${reg.host}/test/busybox:1`),
      store.pull(`${reg.host}/test/busybox:1`),
      store.pull(`${reg.host}/test/app:1`),
    ]);
    const unique = new Map([...busybox.layers, ...app.layers].map((l) => [l.digest, l.size]));
    const total = [...unique.values()].reduce((a, b) => a + b, 0);
    expect(pulls.reduce((a, p) => a + p.downloadedBytes, 0)).toBe(total);
    expect(await ociLayerDirs(home)).toHaveLength(4);
    expect(pulls[0]!.layers).toEqual(pulls[1]!.layers);
    expect(await leftovers(home)).toEqual([]);
  });

  it('names an unknown tag or repository', async () => {
    const store = new ImageStore({ home: await freshHome() });
    await expectOciError(
      store.pull(`${reg.host}/test/busybox:nope`),
      'not_found',
      /test\/busybox:nope not found/,
    );
    await expectOciError(
      store.pull(`${reg.host}/test/missing`),
      'not_found',
      /test\/missing:latest not found/,
    );
  });

  it('fails cleanly when the disk fills up: no partial layer or blob is kept', async () => {
    const big = ociImage([await randomLayer(3 << 20)]);
    const layout = join(work, 'layout-big');
    await writeLayout(layout, [{ tag: 'big', top: big.manifest, blobs: imageBlobs(big) }]);
    await skopeoPush(layout, 'big', `${reg.host}/test/big:1`);
    for (const size of ['1m', '4m']) {
      // 1m: the download itself does not fit; 4m: the download fits, unpacking it does not
      const home = join(work, `tmpfs-${size}`);
      await mkdir(home, { recursive: true });
      await run('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'aenv-oci-test', home]);
      try {
        const e = await expectOciError(
          new ImageStore({ home }).pull(`${reg.host}/test/big:1`),
          'disk_full',
          /no space left/,
        );
        expect(e.message).toContain('test/big:1');
        expect(await leftovers(home)).toEqual([]);
        expect(await ociLayerDirs(home)).toEqual([]);
        expect(await readdir(join(home, 'images', 'blobs', 'sha256'))).not.toContain(
          big.layers[0]!.digest.slice(7),
        );
      } finally {
        await run('umount', ['--lazy', home]);
      }
    }
  });

  it('evicts least recently used unpinned layers, and refuses when everything is pinned', async () => {
    const one = ociImage([await randomLayer(1 << 20, 'one.bin')]);
    const two = ociImage([await randomLayer(1 << 20, 'two.bin')]);
    const layout = join(work, 'layout-evict');
    await writeLayout(layout, [
      { tag: 'one', top: one.manifest, blobs: imageBlobs(one) },
      { tag: 'two', top: two.manifest, blobs: imageBlobs(two) },
    ]);
    await skopeoPush(layout, 'one', `${reg.host}/test/one:1`);
    await skopeoPush(layout, 'two', `${reg.host}/test/two:1`);
    const home = await freshHome();
    const store = new ImageStore({ home, capacityBytes: 1.5 * (1 << 20) });
    const a = await store.pull(`${reg.host}/test/one:1`, { pinAs: 'template-one' });
    const e = await store.pull(`${reg.host}/test/two:1`).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LayerCacheFullError);
    expect((e as OciError).code).toBe('cache_full');
    // the failed pull did not leave the cache over capacity
    expect(await ociLayerDirs(home)).toEqual([a.layerIds[0]]);
    await store.unpin('template-one');
    const b = await store.pull(`${reg.host}/test/two:1`);
    expect(await ociLayerDirs(home)).toEqual([b.layerIds[0]]);
    expect(store.cache.usage().usedBytes).toBeLessThanOrEqual(1.5 * (1 << 20));
    // pins are durable: a new store on the same home still honours them
    await store.pin('template-two', b.layerIds);
    const reopened = new ImageStore({ home, capacityBytes: 1.5 * (1 << 20) });
    await expect(reopened.pull(`${reg.host}/test/one:1`)).rejects.toBeInstanceOf(LayerCacheFullError);
    expect(await ociLayerDirs(home)).toEqual([b.layerIds[0]]);
    expect(await leftovers(home)).toEqual([]);
  });
});
