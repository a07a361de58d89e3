import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  downloadDestination,
  modeGroups,
  planDownload,
  planUpload,
  tempSibling,
  uploadDestination,
} from '../../src/lib/transfer-plan.js';

describe('destinations (cp -r semantics)', () => {
  it('uploads into an existing directory or a path ending in /', () => {
    expect(uploadDestination('./src', '/home/user', true)).toBe('/home/user/src');
    expect(uploadDestination('/tmp/data.csv', 'inbox/', false)).toBe('inbox/data.csv');
    expect(uploadDestination('./src/', '/home/user/', false)).toBe('/home/user/src');
  });

  it('otherwise renames to the destination', () => {
    expect(uploadDestination('./src', '/home/user/project', false)).toBe('/home/user/project');
  });

  it('downloads into the current directory, an existing directory, or a new name', () => {
    expect(downloadDestination('out.json', undefined, false, '/w')).toBe(path.join('/w', 'out.json'));
    expect(downloadDestination('results', '/tmp/r', true)).toBe(path.join('/tmp/r', 'results'));
    expect(downloadDestination('results', `/tmp/new${path.sep}`, false)).toBe(
      path.join('/tmp/new', 'results'),
    );
    expect(downloadDestination('results', '/tmp/r7', false)).toBe('/tmp/r7');
  });

  it('needs a local name for the remote root', () => {
    expect(() => downloadDestination('/', undefined, false)).toThrow(/give a local path/);
  });
});

describe('planUpload', () => {
  it('maps a tree and only creates directories that would stay empty', () => {
    const plan = planUpload(
      '/l/src',
      [
        { rel: '', kind: 'dir', size: 0 },
        { rel: 'a', kind: 'dir', size: 0 },
        { rel: 'a/b.bin', kind: 'file', size: 10, mode: 0o755 },
        { rel: 'empty', kind: 'dir', size: 0 },
        { rel: 'top.txt', kind: 'file', size: 5 },
      ],
      '/r/dest',
    );
    expect(plan.dirs).toEqual(['/r/dest/empty']);
    expect(plan.files).toEqual([
      { from: path.join('/l/src', 'a', 'b.bin'), to: '/r/dest/a/b.bin', size: 10, mode: 0o755 },
      { from: path.join('/l/src', 'top.txt'), to: '/r/dest/top.txt', size: 5 },
    ]);
    expect(plan.totalBytes).toBe(15);
  });

  it('creates an empty root directory and maps a single file to the destination itself', () => {
    expect(planUpload('/l/e', [{ rel: '', kind: 'dir', size: 0 }], '/r/e').dirs).toEqual(['/r/e']);
    const single = planUpload('/l/f.txt', [{ rel: '', kind: 'file', size: 3 }], '/r/g.txt');
    expect(single.files).toEqual([{ from: '/l/f.txt', to: '/r/g.txt', size: 3 }]);
  });
});

describe('planDownload', () => {
  const entry = (p: string, kind: 'file' | 'dir' | 'other', extra = {}) => ({
    path: p,
    kind,
    size: 4,
    mode: 0o640,
    ...extra,
  });

  it('maps remote paths under the local root', () => {
    const plan = planDownload(
      '/home/user/res',
      [
        entry('/home/user/res/a', 'dir'),
        entry('/home/user/res/a/x', 'file'),
        entry('/home/user/res/y', 'file'),
      ],
      '/tmp/out',
    );
    expect(plan.dirs).toEqual(['/tmp/out', path.join('/tmp/out', 'a')]);
    expect(plan.files.map((f) => [f.from, f.to, f.mode])).toEqual([
      ['/home/user/res/a/x', path.join('/tmp/out', 'a', 'x'), 0o640],
      ['/home/user/res/y', path.join('/tmp/out', 'y'), 0o640],
    ]);
    expect(plan.totalBytes).toBe(8);
  });

  it('skips symlinked directories and dangling links', () => {
    const plan = planDownload(
      '/r',
      [
        entry('/r/link', 'dir', { symlinkTarget: '/etc' }),
        entry('/r/dead', 'other', { symlinkTarget: '/r/dead' }),
      ],
      '/l',
    );
    expect(plan.files).toEqual([]);
    expect(plan.skipped).toEqual(['/r/link (symlink to a directory)', '/r/dead (dangling symlink)']);
  });

  it('refuses entries outside the listed root', () => {
    expect(() => planDownload('/r', [entry('/etc/passwd', 'file')], '/l')).toThrow(/outside/);
    expect(() => planDownload('/r', [entry('/r/../x', 'file')], '/l')).toThrow(/outside/);
  });
});

describe('helpers', () => {
  it('groups files whose mode differs from 0644', () => {
    const groups = modeGroups([
      { from: 'a', to: '/a', size: 1, mode: 0o755 },
      { from: 'b', to: '/b', size: 1, mode: 0o644 },
      { from: 'c', to: '/c', size: 1, mode: 0o100755 },
      { from: 'd', to: '/d', size: 1, mode: 0o600 },
      { from: 'e', to: '/e', size: 1 },
    ]);
    expect([...groups.entries()]).toEqual([
      [0o755, ['/a', '/c']],
      [0o600, ['/d']],
    ]);
  });

  it('puts temp files next to their target', () => {
    expect(tempSibling('/x/y/file.bin', 'ab12')).toBe(path.join('/x/y', '.file.bin.aenv-ab12.tmp'));
  });
});
