import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import tar from 'tar-stream';
import { afterEach, describe, expect, it } from 'vitest';
import { OciError } from '../../src/errors.js';
import { DEFAULT_UNPACK_LIMITS, ImageBudget, type UnpackLimits } from '../../src/limits.js';
import { readTar } from '../../src/tar.js';
import { unpackLayer } from '../../src/unpack.js';

const MiB = 2 ** 20;
const limits = (o: Partial<UnpackLimits>): UnpackLimits => ({ ...DEFAULT_UNPACK_LIMITS, ...o });

/** A tar archive of `entries`, each a file with `size` zero bytes. */
async function archive(entries: number, size = 0): Promise<Buffer> {
  const p = tar.pack();
  const out: Buffer[] = [];
  const done = (async () => {
    for await (const c of p as AsyncIterable<Buffer>) out.push(c);
  })();
  for (let i = 0; i < entries; i++) p.entry({ name: `f${i}`, size }, Buffer.alloc(size));
  p.finalize();
  await done;
  return Buffer.concat(out);
}

/** A gzip bomb: one file of 64 MiB of zeros, which compresses to about a thousandth of it. */
let bombBlob: Promise<Buffer> | undefined;
const bomb = () => (bombBlob ??= archive(1, 64 * MiB).then((t) => zlib.gzipSync(t, { level: 1 })));

/** Reads every member to the end; `counted` is told of each chunk the reader pulls. */
async function readAll(
  source: AsyncIterable<Buffer>,
  budget: ReturnType<ImageBudget['layer']>,
  counted: (n: number) => void = () => undefined,
): Promise<void> {
  const counting = (async function* () {
    for await (const c of source) {
      counted(c.length);
      yield c;
    }
  })();
  for await (const m of readTar(counting, budget)) for await (const _ of m.body) void _;
}

describe('what a layer may unpack', { timeout: 30_000 }, () => {
  it('stops a gzip bomb at the layer limit, without inflating the rest', async () => {
    const blob = await bomb();
    expect(blob.length).toBeLessThan(MiB);
    const budget = new ImageBudget(limits({ layerBytes: 4 * MiB }), 'image x').layer('layer a');
    let pulled = 0;
    const gunzip = Readable.from([blob]).pipe(zlib.createGunzip());
    const err = await readAll(gunzip, budget, (n) => (pulled += n)).catch((e: unknown) => e);
    gunzip.destroy();
    expect(err).toBeInstanceOf(OciError);
    expect((err as OciError).code).toBe('over_limit');
    expect((err as Error).message).toBe(
      "layer a has more than 4.0 MiB uncompressed (the node's limit, [image] max_layer_mb)",
    );
    expect(pulled).toBeLessThan(8 * MiB);
  });

  it('refuses an archive with more entries than a layer may have', async () => {
    const budget = () => new ImageBudget(limits({ layerEntries: 100 }), 'image x').layer('layer a');
    await expect(readAll(Readable.from([await archive(100)]), budget())).resolves.toBeUndefined();
    await expect(readAll(Readable.from([await archive(101)]), budget())).rejects.toThrow(
      "layer a has more than 100 entries (the node's limit, [image] max_layer_entries)",
    );
  });

  it('counts every layer of an image against the image limits', async () => {
    const image = new ImageBudget(limits({ imageBytes: 3 * MiB, imageEntries: 150 }), 'image x');
    await readAll(Readable.from([await archive(1, 2 * MiB)]), image.layer('layer a'));
    await expect(readAll(Readable.from([await archive(1, 2 * MiB)]), image.layer('layer b'))).rejects.toThrow(
      "image x has more than 3.0 MiB uncompressed in its layers (the node's limit, [image] max_image_mb)",
    );
    const entries = new ImageBudget(limits({ imageEntries: 150 }), 'image y');
    await readAll(Readable.from([await archive(100)]), entries.layer('layer a'));
    await expect(readAll(Readable.from([await archive(100)]), entries.layer('layer b'))).rejects.toThrow(
      /image y has more than 150 entries in its layers .*max_image_entries/,
    );
  });

  it('checks the totals layers recorded when they were unpacked by an earlier pull', () => {
    const image = new ImageBudget(limits({ imageBytes: 10 * MiB, imageEntries: 10 }), 'image x');
    expect(() => image.checkTotals([{ entries: 5, archiveBytes: 5 * MiB, bytes: 0 }])).not.toThrow();
    expect(() =>
      image.checkTotals([
        { entries: 5, archiveBytes: 5 * MiB, bytes: 0 },
        { entries: 1, bytes: 6 * MiB },
      ]),
    ).toThrow(/image x has more than 10.0 MiB/);
    expect(() => image.checkTotals([{ entries: 11, bytes: 0 }])).toThrow(/more than 10 entries/);
  });
});

describe('unpacking a layer within limits', { timeout: 30_000 }, () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('refuses a gzip bomb blob by its uncompressed size, naming the layer and the limit', async () => {
    dir = await mkdtemp(join(tmpdir(), 'aenv-unpack-'));
    const blob = join(dir, 'blob');
    await writeFile(blob, await bomb());
    const target = join(dir, 'rootfs');
    await mkdir(target);
    const budget = new ImageBudget(limits({ layerBytes: 2 * MiB }), 'image x').layer('layer sha256:bomb');
    await expect(unpackLayer(blob, target, { what: 'layer sha256:bomb', budget })).rejects.toThrow(
      /^layer sha256:bomb: layer sha256:bomb has more than 2.0 MiB uncompressed/,
    );
  });

  it('records the uncompressed size of what it unpacked', async () => {
    dir = await mkdtemp(join(tmpdir(), 'aenv-unpack-'));
    const blob = join(dir, 'blob');
    const plain = await archive(3, 1000);
    await writeFile(blob, zlib.gzipSync(plain));
    const target = join(dir, 'rootfs');
    await mkdir(target);
    const r = await unpackLayer(blob, target, { what: 'layer a' });
    expect(r).toMatchObject({ entries: 3, archiveBytes: plain.length });
    expect((await readdir(target)).sort()).toEqual(['f0', 'f1', 'f2']);
  });
});
