import { chmod, lstat, mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FileType } from '@agentenv/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDirs } from '../../src/filesystem/dirs.js';
import { entryInfo } from '../../src/filesystem/entry.js';
import { compareNames, listDir } from '../../src/filesystem/list.js';

const namer = { user: (uid: number) => `u${uid}`, group: (gid: number) => `g${gid}` };
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'envd-list-'));
  await mkdir(path.join(dir, 'b/deep/deeper'), { recursive: true });
  await writeFile(path.join(dir, 'b/deep/deeper/f'), 'f');
  await writeFile(path.join(dir, 'b/one.txt'), '1');
  await writeFile(path.join(dir, 'a.txt'), 'hello');
  await writeFile(path.join(dir, 'C.txt'), 'upper');
  await symlink('a.txt', path.join(dir, 'link-to-a'));
  await symlink('b', path.join(dir, 'link-to-b'));
  await symlink('nowhere', path.join(dir, 'dangling'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('entryInfo', () => {
  it('describes a file like E2B envd', async () => {
    const p = path.join(dir, 'a.txt');
    await chmod(p, 0o644);
    const st = await lstat(p);
    const e = await entryInfo(p, namer);
    expect(e).toMatchObject({
      name: 'a.txt',
      type: FileType.FILE,
      path: p,
      size: 5n,
      mode: 0o644,
      permissions: '-rw-r--r--',
      owner: `u${st.uid}`,
      group: `g${st.gid}`,
      metadata: {},
    });
    expect(e.symlinkTarget).toBeUndefined();
    expect(Number(e.modifiedTime!.seconds)).toBe(Math.floor(st.mtimeMs / 1000));
  });

  it('reports a directory with its permission bits only in mode', async () => {
    const p = path.join(dir, 'b');
    await chmod(p, 0o755);
    expect(await entryInfo(p, namer)).toMatchObject({
      type: FileType.DIRECTORY,
      mode: 0o755,
      permissions: 'drwxr-xr-x',
    });
  });

  it("reports a symlink with its target's type and resolved path", async () => {
    const e = await entryInfo(path.join(dir, 'link-to-a'), namer);
    expect(e).toMatchObject({
      name: 'link-to-a',
      type: FileType.FILE,
      mode: 0o644,
      permissions: 'Lrwxrwxrwx',
    });
    expect(e.symlinkTarget).toBe(path.join(dir, 'a.txt'));
    const d = await entryInfo(path.join(dir, 'dangling'), namer);
    expect(d).toMatchObject({
      type: FileType.UNSPECIFIED,
      mode: 0,
      symlinkTarget: path.join(dir, 'dangling'),
    });
  });

  it('throws ENOENT for a missing path', async () => {
    await expect(entryInfo(path.join(dir, 'missing'), namer)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('listDir', () => {
  it('lists one level in byte order by default', async () => {
    const names = (await listDir(dir, 0, namer)).map((e) => e.name);
    expect(names).toEqual(['C.txt', 'a.txt', 'b', 'dangling', 'link-to-a', 'link-to-b']);
    expect(compareNames('é', 'z')).toBeGreaterThan(0);
  });

  it('walks deeper in pre-order with paths under the requested directory', async () => {
    const paths = (await listDir(dir, 3, namer)).map((e) => path.relative(dir, e.path));
    expect(paths).toEqual([
      'C.txt',
      'a.txt',
      'b',
      'b/deep',
      'b/deep/deeper',
      'b/one.txt',
      'dangling',
      'link-to-a',
      'link-to-b',
    ]);
    const all = await listDir(dir, 10, namer);
    expect(all.map((e) => path.relative(dir, e.path))).toContain('b/deep/deeper/f');
  });

  it('lists through a symlinked directory, keeping the requested path', async () => {
    const entries = await listDir(path.join(dir, 'link-to-b'), 1, namer);
    expect(entries.map((e) => e.path)).toEqual([
      path.join(dir, 'link-to-b/deep'),
      path.join(dir, 'link-to-b/one.txt'),
    ]);
  });

  it('refuses files and missing paths', async () => {
    await expect(listDir(path.join(dir, 'a.txt'), 1, namer)).rejects.toMatchObject({
      kind: 'invalid_argument',
    });
    await expect(listDir(path.join(dir, 'missing'), 1, namer)).rejects.toMatchObject({ kind: 'not_found' });
  });
});

describe('ensureDirs', () => {
  it('creates missing parents owned by the user and refuses a file in the way', async () => {
    const target = path.join(dir, 'made/x/y');
    await ensureDirs(target, 1234, 2345);
    for (const p of ['made', 'made/x', 'made/x/y']) {
      const st = await stat(path.join(dir, p));
      expect(st.isDirectory()).toBe(true);
      if (process.getuid?.() === 0) expect([st.uid, st.gid]).toEqual([1234, 2345]);
    }
    await expect(ensureDirs(path.join(dir, 'a.txt/sub'), 0, 0)).rejects.toMatchObject({
      kind: 'invalid_argument',
    });
  });
});
