import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BuildFiles, type CopyEntry } from '../../src/templates/builds/files.js';

const MiB = 2 ** 20;
const HASH = 'a'.repeat(64);
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aenv-build-files-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes a tar of `files` (name → size; each a run of one byte value) to disk a MiB at a time. */
async function writeArchive(path: string, files: Record<string, number>): Promise<void> {
  const pack = tar.pack();
  const written = pipeline(pack, createWriteStream(path));
  for (const [name, size] of Object.entries(files)) {
    let entry!: ReturnType<typeof pack.entry>;
    const done = new Promise((r) => (entry = pack.entry({ name, size }, r)));
    for (let left = size; left > 0; left -= MiB) {
      if (!entry.write(Buffer.alloc(Math.min(MiB, left), name.length))) {
        await new Promise((r) => entry.once('drain', r));
      }
    }
    entry.end();
    await done;
  }
  pack.finalize();
  await written;
}

async function upload(files: BuildFiles, archive: Record<string, number>): Promise<void> {
  const path = join(dir, 'upload.tar');
  await writeArchive(path, archive);
  await files.put(HASH, createReadStream(path));
}

describe('COPY archives', () => {
  it('streams a 64 MiB member out of the stored archive, never as one buffer', async () => {
    const files = new BuildFiles(join(dir, 'store'));
    await upload(files, { 'ctx/big.bin': 64 * MiB, 'ctx/small': 3 });
    const got: { target: string; length: number; read: number; largestChunk: number; sha: string }[] = [];
    for await (const e of files.entries(HASH, 'ctx', '/app') as AsyncIterable<CopyEntry>) {
      if (e.type !== 'file') continue;
      let read = 0;
      let largestChunk = 0;
      const hash = createHash('sha256');
      for await (const c of e.data.stream) {
        read += c.length;
        largestChunk = Math.max(largestChunk, c.length);
        hash.update(c);
      }
      got.push({ target: e.target, length: e.data.length, read, largestChunk, sha: hash.digest('hex') });
    }
    const zeros = createHash('sha256');
    for (let i = 0; i < 64; i++) zeros.update(Buffer.alloc(MiB, 'ctx/big.bin'.length));
    expect(got.map((g) => [g.target, g.length, g.read])).toEqual([
      ['/app/big.bin', 64 * MiB, 64 * MiB],
      ['/app/small', 3, 3],
    ]);
    expect(got[0]!.sha).toBe(zeros.digest('hex'));
    // The member arrives in the pieces the file is read in, each far below its size.
    expect(got[0]!.largestChunk).toBeLessThanOrEqual(MiB);
  });

  it('refuses an archive that unpacks to more bytes or entries than a COPY may', async () => {
    const drain = async (files: BuildFiles) => {
      for await (const e of files.entries(HASH, '.', '/app'))
        if (e.type === 'file') for await (const _ of e.data.stream) void _;
    };
    const bytes = new BuildFiles(join(dir, 'bytes'), { bytes: 4 * MiB, entries: 100 });
    await upload(bytes, { big: 8 * MiB });
    await expect(drain(bytes)).rejects.toThrow(
      `the files of COPY . (${HASH}) hold more than ${4 * MiB} bytes uncompressed`,
    );
    const entries = new BuildFiles(join(dir, 'entries'), { bytes: 4 * MiB, entries: 2 });
    await upload(entries, { a: 1, b: 1, c: 1 });
    await expect(drain(entries)).rejects.toThrow(`the files of COPY . (${HASH}) hold more than 2 entries`);
  });
});
