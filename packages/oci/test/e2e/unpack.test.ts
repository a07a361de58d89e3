import { execFile } from 'node:child_process';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OciError } from '../../src/errors.js';
import { unpackLayer } from '../../src/unpack.js';
import { sha256, tarOf, type TarItem } from '@agentenv/test-support/oci';

const run = promisify(execFile);
let work: string;
let n = 0;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'aenv-oci-unpack-'));
});
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

/** Unpacks `items` (gzipped) into a fresh directory inside a sandbox dir that also holds a decoy. */
async function unpack(items: TarItem[] | Buffer) {
  const box = join(work, `box-${n++}`);
  const target = join(box, 'layer');
  await mkdir(target, { recursive: true });
  await writeFile(join(box, 'decoy'), 'untouched\n');
  const tar = Buffer.isBuffer(items) ? items : await tarOf(items);
  const blob = join(box, 'blob.gz');
  await writeFile(blob, gzipSync(tar));
  const result = await unpackLayer(blob, target, { expectedDiffId: sha256(tar), what: 'test layer' });
  return { box, target, result };
}

async function unsafe(items: TarItem[], text: RegExp) {
  const e = await unpack(items).then(
    () => new Error('expected the layer to be refused'),
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(OciError);
  expect((e as OciError).code).toBe('unsafe_layer');
  expect((e as Error).message).toMatch(text);
}

describe('layer safety: nothing escapes the layer directory', () => {
  it('refuses absolute paths and .. components', async () => {
    await unsafe([{ name: '/etc/evil', content: 'x' }], /absolute path/);
    await unsafe([{ name: 'a/../../decoy', content: 'x' }], /escapes the layer/);
    await unsafe([{ name: '../decoy', content: 'x' }], /escapes the layer/);
  });

  it('refuses to write beneath a symlink (relative or absolute)', async () => {
    await unsafe(
      [
        { name: 'up', type: 'symlink', linkname: '..' },
        { name: 'up/decoy', content: 'owned' },
      ],
      /goes through the symlink up/,
    );
    await unsafe(
      [
        { name: 'etc', type: 'symlink', linkname: '/etc' },
        { name: 'etc/passwd', content: 'owned' },
      ],
      /goes through the symlink etc/,
    );
  });

  it('replaces a symlink by a file instead of writing through it', async () => {
    const { box, target } = await unpack([
      { name: 'f', type: 'symlink', linkname: '../decoy' },
      { name: 'f', content: 'replaced\n' },
    ]);
    expect(await readFile(join(box, 'decoy'), 'utf8')).toBe('untouched\n');
    expect((await lstat(join(target, 'f'))).isFile()).toBe(true);
    expect(await readFile(join(target, 'f'), 'utf8')).toBe('replaced\n');
  });

  it('keeps hard links inside the layer', async () => {
    await unsafe([{ name: 'h', type: 'link', linkname: '../decoy' }], /escapes the layer/);
    await unsafe([{ name: 'h', type: 'link', linkname: '/etc/passwd' }], /absolute path/);
    await unsafe([{ name: 'h', type: 'link', linkname: 'not/here' }], /points outside the layer/);
    await unsafe(
      [
        { name: 'd/', type: 'directory' },
        { name: 'h', type: 'link', linkname: 'd' },
      ],
      /points to a directory/,
    );
    await unsafe(
      [
        { name: 's', type: 'symlink', linkname: '/etc' },
        { name: 'h', type: 'link', linkname: 's/passwd' },
      ],
      /goes through a symlink/,
    );
    const { target } = await unpack([
      { name: 'a', content: 'shared\n' },
      { name: 'b', type: 'link', linkname: 'a' },
    ]);
    expect((await lstat(join(target, 'a'))).ino).toBe((await lstat(join(target, 'b'))).ino);
  });

  it('symlinks may point anywhere: they are only stored, never followed', async () => {
    const { target } = await unpack([{ name: 'bin/sh', type: 'symlink', linkname: '/bin/busybox' }]);
    expect(await readlink(join(target, 'bin/sh'))).toBe('/bin/busybox');
  });
});

describe('layer contents', () => {
  it('applies ownership, modes, times; later entries replace earlier ones', async () => {
    const { target, result } = await unpack([
      { name: 'd/', type: 'directory', mode: 0o750, uid: 7, gid: 8, mtime: new Date('2020-01-01T00:00:00Z') },
      { name: 'd/f', content: 'one', mode: 0o640, uid: 7, gid: 8, mtime: new Date('2021-01-01T00:00:00Z') },
      { name: 'x', content: 'file first' },
      { name: 'x/', type: 'directory' },
      { name: 'x/inside', content: 'dir now' },
      { name: 'y/', type: 'directory' },
      { name: 'y/child', content: 'gone' },
      { name: 'y', content: 'file now' },
    ]);
    const d = await lstat(join(target, 'd'));
    expect([d.mode & 0o7777, d.uid, d.gid]).toEqual([0o750, 7, 8]);
    expect(d.mtime.toISOString()).toBe('2020-01-01T00:00:00.000Z');
    const f = await lstat(join(target, 'd/f'));
    expect([f.mode & 0o7777, f.uid, f.gid, f.mtime.toISOString()]).toEqual([
      0o640,
      7,
      8,
      '2021-01-01T00:00:00.000Z',
    ]);
    expect(await readdir(join(target, 'x'))).toEqual(['inside']);
    expect(await readFile(join(target, 'y'), 'utf8')).toBe('file now');
    expect(result.entries).toBe(8);
  });

  it('turns whiteouts into 0/0 character devices and opaque markers into the overlay xattr', async () => {
    const { target, result } = await unpack([
      { name: 'a/.wh.gone' },
      { name: 'b/.wh..wh..opq' },
      { name: 'b/new', content: 'x' },
      { name: '.wh.top' },
      { name: 'c/.wh..wh.plnk' },
    ]);
    for (const p of ['a/gone', 'top']) {
      const st = await lstat(join(target, p));
      expect(st.isCharacterDevice()).toBe(true);
      expect(st.rdev).toBe(0);
    }
    const { stdout } = await run('getfattr', ['--absolute-names', '-d', '-m', '-', join(target, 'b')]);
    expect(stdout).toContain('trusted.overlay.opaque="y"');
    expect(await readdir(join(target, 'c'))).toEqual([]);
    expect(result).toMatchObject({ whiteouts: 2, opaqueDirs: 1, rootOpaque: false });
  });

  it('reports an opaque marker at the layer root (the caller drops the layers below)', async () => {
    const { result } = await unpack([{ name: '.wh..wh..opq' }, { name: 'only', content: 'x' }]);
    expect(result.rootOpaque).toBe(true);
  });

  it('creates device nodes and FIFOs, keeps user/security xattrs, drops trusted.* from the image', async () => {
    const { target } = await unpack([
      { name: 'dev/null', type: 'character-device', mode: 0o666, devmajor: 1, devminor: 3 },
      { name: 'run/pipe', type: 'fifo', mode: 0o600 },
      {
        name: 'f',
        content: 'x',
        pax: { 'SCHILY.xattr.user.k': 'v', 'SCHILY.xattr.trusted.overlay.opaque': 'y' },
      },
    ]);
    const dev = await lstat(join(target, 'dev/null'));
    expect(dev.isCharacterDevice()).toBe(true);
    expect(dev.rdev).toBe(259); // makedev(1, 3)
    expect(dev.mode & 0o7777).toBe(0o666);
    expect((await lstat(join(target, 'run/pipe'))).isFIFO()).toBe(true);
    const { stdout } = await run('getfattr', ['--absolute-names', '-d', '-m', '-', join(target, 'f')]);
    expect(stdout).toContain('user.k="v"');
    expect(stdout).not.toContain('trusted');
  });

  it('reads GNU tar archives (long names, hard links) as produced by the tar program', async () => {
    const src = join(work, 'gnu-src');
    const deep = join(src, 'a'.repeat(60), 'b'.repeat(60));
    await mkdir(deep, { recursive: true });
    await writeFile(join(deep, `${'c'.repeat(120)}.txt`), 'deep\n');
    await run('ln', [join(deep, `${'c'.repeat(120)}.txt`), join(src, 'hard')]);
    const { stdout } = await run('tar', ['--format=gnu', '-C', src, '-cf', '-', '.'], { encoding: 'buffer' });
    const { target } = await unpack(stdout as unknown as Buffer);
    const file = join(target, 'a'.repeat(60), 'b'.repeat(60), `${'c'.repeat(120)}.txt`);
    expect(await readFile(file, 'utf8')).toBe('deep\n');
    expect((await lstat(join(target, 'hard'))).ino).toBe((await lstat(file)).ino);
  });

  it('rejects a layer whose content does not match its diff id', async () => {
    const box = join(work, 'diff');
    await mkdir(join(box, 'layer'), { recursive: true });
    await writeFile(join(box, 'blob'), gzipSync(await tarOf([{ name: 'a', content: 'a' }])));
    await expect(
      unpackLayer(join(box, 'blob'), join(box, 'layer'), {
        expectedDiffId: `sha256:${'0'.repeat(64)}`,
        what: 'l',
      }),
    ).rejects.toThrow(/uncompressed content hashes to/);
  });
});
