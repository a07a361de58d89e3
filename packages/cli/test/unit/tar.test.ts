import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paxRecord, splitUstarName, tarHeader, writeTarGz } from '../../src/lib/tar.js';

/** A minimal reader: name (with prefix / PAX path), type, size and content of each member. */
function readTar(buf: Buffer) {
  const out: { name: string; type: string; size: number; mode: number; data: Buffer }[] = [];
  let off = 0;
  let paxPath: string | undefined;
  while (off + 512 <= buf.length) {
    const h = buf.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    const str = (a: number, n: number) =>
      h
        .subarray(a, a + n)
        .toString('utf8')
        .replace(/\0.*$/s, '');
    const sum = h.reduce((s, b, i) => s + (i >= 148 && i < 156 ? 32 : b), 0);
    expect(parseInt(str(148, 8), 8)).toBe(sum);
    const size = parseInt(str(124, 12), 8);
    const type = str(156, 1);
    const data = buf.subarray(off + 512, off + 512 + size);
    off += 512 + Math.ceil(size / 512) * 512;
    if (type === 'x') {
      paxPath = /path=(.*)\n/.exec(data.toString())?.[1];
      continue;
    }
    const prefix = str(345, 155);
    const name = paxPath ?? (prefix ? `${prefix}/${str(0, 100)}` : str(0, 100));
    paxPath = undefined;
    out.push({ name, type, size, mode: parseInt(str(100, 8), 8), data: Buffer.from(data) });
  }
  return out;
}

describe('tar headers', () => {
  it('writes PAX records whose length counts itself', () => {
    for (const v of ['x', 'a'.repeat(90), 'b'.repeat(95), 'c'.repeat(200)]) {
      const rec = paxRecord('path', v);
      expect(Number(rec.split(' ')[0])).toBe(Buffer.byteLength(rec));
    }
  });

  it('splits long names into prefix and name', () => {
    const long = `${'d'.repeat(60)}/${'e'.repeat(60)}/file.txt`;
    expect(splitUstarName(long)).toEqual({ prefix: `${'d'.repeat(60)}/${'e'.repeat(60)}`, name: 'file.txt' });
    expect(splitUstarName('short')).toEqual({ prefix: '', name: 'short' });
    expect(splitUstarName('x'.repeat(120))).toBeUndefined();
  });

  it('marks directories and uses a PAX header for unsplittable names', () => {
    const dir = readTar(
      Buffer.concat([tarHeader({ name: 'a/b', kind: 'dir', mode: 0o755, size: 0, mtime: 0 })]),
    );
    expect(dir[0]).toMatchObject({ name: 'a/b/', type: '5', mode: 0o755 });
    const name = 'y'.repeat(150);
    const h = tarHeader({ name, kind: 'file', mode: 0o644, size: 0, mtime: 0 });
    expect(readTar(h)[0]!.name).toBe(name);
  });
});

describe('writeTarGz', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'aenv-tar-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('archives files with their content, padded to blocks', async () => {
    const bin = Buffer.from(Array.from({ length: 1300 }, (_, i) => (i * 7) % 256));
    await writeFile(path.join(dir, 'bin'), bin);
    await writeFile(path.join(dir, 'empty'), '');
    const out = path.join(dir, 'x.tar.gz');
    await writeTarGz(
      [
        { name: 'src', kind: 'dir', mode: 0o755, size: 0, mtime: 1 },
        {
          name: 'src/bin',
          kind: 'file',
          mode: 0o600,
          size: bin.length,
          mtime: 1,
          source: path.join(dir, 'bin'),
        },
        { name: 'src/empty', kind: 'file', mode: 0o644, size: 0, mtime: 1, source: path.join(dir, 'empty') },
      ],
      out,
    );
    const raw = gunzipSync(await readFile(out));
    expect(raw.length % 512).toBe(0);
    const members = readTar(raw);
    expect(members.map((m) => [m.name, m.type, m.size, m.mode])).toEqual([
      ['src/', '5', 0, 0o755],
      ['src/bin', '0', 1300, 0o600],
      ['src/empty', '0', 0, 0o644],
    ]);
    expect(members[1]!.data.equals(bin)).toBe(true);
  });
});
