import { describe, expect, it } from 'vitest';
import { OciError } from '../../src/errors.js';
import type { TarHeader } from '../../src/tar-header.js';
import { LayerPlanner, OVERLAY_OPAQUE_XATTR, safeComponents, type Step } from '../../src/unpack-plan.js';

/** A tar header with defaults: a root-owned 0644 file of 10 bytes. */
function entry(path: string, over: Partial<TarHeader> = {}): TarHeader {
  return {
    path,
    type: 'file',
    mode: 0o644,
    uid: 0,
    gid: 0,
    size: 10,
    mtime: 1_600_000_000,
    linkname: '',
    devmajor: 0,
    devminor: 0,
    xattrs: new Map(),
    ...over,
  };
}

const dir = (path: string, over: Partial<TarHeader> = {}) =>
  entry(path, { type: 'dir', size: 0, mode: 0o755, ...over });

/** Plans every entry and returns the steps of each (the last one's by default). */
function plan(...headers: TarHeader[]): { planner: LayerPlanner; steps: Step[][] } {
  const planner = new LayerPlanner();
  return { planner, steps: headers.map((h) => planner.entry(h)) };
}

function refused(headers: TarHeader[], text: RegExp): void {
  const planner = new LayerPlanner();
  let error: unknown;
  try {
    for (const h of headers) planner.entry(h);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(OciError);
  expect((error as OciError).code).toBe('unsafe_layer');
  expect((error as Error).message).toMatch(text);
}

describe('layer planner: paths', () => {
  it('splits paths into components and refuses what could leave the layer', () => {
    expect(safeComponents('./a//b/')).toEqual(['a', 'b']);
    expect(safeComponents('./')).toEqual([]);
    expect(() => safeComponents('/etc/passwd')).toThrow(/absolute path/);
    expect(() => safeComponents('a/../../x')).toThrow(/escapes the layer/);
    expect(() => safeComponents('a\0b')).toThrow(/NUL byte/);
  });

  it('plans nothing for the layer root itself', () => {
    expect(plan(dir('./')).steps).toEqual([[]]);
  });

  it('creates missing parents 0755 before the entry, once', () => {
    const { steps } = plan(entry('a/b/f'), entry('a/b/g'));
    expect(steps[0]).toEqual([
      { op: 'mkdir', rel: 'a' },
      { op: 'attrs', rel: 'a', mode: 0o755 },
      { op: 'mkdir', rel: 'a/b' },
      { op: 'attrs', rel: 'a/b', mode: 0o755 },
      { op: 'file', rel: 'a/b/f', mode: 0o644, owner: { uid: 0, gid: 0 }, mtime: 1_600_000_000 },
    ]);
    expect(steps[1]?.map((s) => s.op)).toEqual(['file']);
  });

  it('refuses entries beneath a symlink or a file of the layer', () => {
    refused(
      [entry('up', { type: 'symlink', linkname: '..' }), entry('up/decoy')],
      /goes through the symlink up/,
    );
    refused([entry('f'), entry('f/g')], /f is not a directory/);
  });
});

describe('layer planner: replacing earlier entries', () => {
  it('removes a symlink before writing a file in its place (never writes through it)', () => {
    const { steps } = plan(entry('f', { type: 'symlink', linkname: '../decoy' }), entry('f'));
    expect(steps[1]?.map((s) => [s.op, s.rel])).toEqual([
      ['remove', 'f'],
      ['file', 'f'],
    ]);
    expect(steps[1]?.[0]).toMatchObject({ dir: false });
  });

  it('keeps an existing directory for a directory entry, updating its mode and owner', () => {
    const { steps } = plan(dir('d'), dir('d', { mode: 0o700, uid: 5, gid: 6 }));
    expect(steps[1]).toEqual([{ op: 'attrs', rel: 'd', mode: 0o700, owner: { uid: 5, gid: 6 } }]);
  });

  it('removes a whole directory replaced by a file, and forgets what was under it', () => {
    const { planner, steps } = plan(dir('y'), entry('y/child'), entry('y'));
    expect(steps[2]?.[0]).toEqual({ op: 'remove', rel: 'y', dir: true });
    // y is a file now: nothing may be created beneath it.
    expect(() => planner.entry(entry('y/child'))).toThrow(/y is not a directory/);
  });
});

describe('layer planner: whiteouts and specials', () => {
  it('turns a whiteout into a queued 0/0 character device and counts it', () => {
    const { planner, steps } = plan(entry('a/.wh.gone', { size: 0 }));
    expect(steps[0]?.map((s) => s.op)).toEqual(['mkdir', 'attrs']);
    const done = planner.finish();
    expect(done.specials).toEqual([
      {
        op: 'mknod',
        rel: 'a/gone',
        kind: 'c',
        major: 0,
        minor: 0,
        mode: 0,
        uid: 0,
        gid: 0,
        mtime: 1_600_000_000,
      },
    ]);
    expect(done.totals.whiteouts).toBe(1);
  });

  it('marks an opaque directory with the overlay xattr, and reports an opaque root', () => {
    const inner = plan(dir('d'), entry('d/.wh..wh..opq', { size: 0 })).planner.finish();
    expect(inner.specials).toEqual([{ op: 'xattr', rel: 'd', name: OVERLAY_OPAQUE_XATTR, value: 'eQ==' }]);
    expect(inner.totals).toMatchObject({ opaqueDirs: 1, rootOpaque: false });
    const root = plan(entry('.wh..wh..opq', { size: 0 })).planner.finish();
    expect(root.specials).toEqual([]);
    expect(root.totals).toMatchObject({ opaqueDirs: 1, rootOpaque: true });
  });

  it('ignores AUFS metadata and refuses a whiteout without a name', () => {
    expect(plan(entry('.wh..wh.plnk/1', { size: 0 })).planner.finish().specials).toEqual([]);
    refused([entry('.wh.', { size: 0 })], /bad whiteout/);
  });

  it('drops a queued device node when a directory takes its place', () => {
    const { planner } = plan(entry('.wh.x', { size: 0 }), entry('x/f'));
    expect(planner.finish().specials).toEqual([]);
  });

  it('applies device nodes before xattrs, keeps only user.* and security.capability', () => {
    const xattrs = new Map([
      ['user.note', Buffer.from('hi')],
      ['trusted.overlay.opaque', Buffer.from('y')],
      ['security.capability', Buffer.from([1])],
    ]);
    const { planner } = plan(
      entry('bin/ping', { xattrs }),
      entry('dev/null', { type: 'char', size: 0, devmajor: 1, devminor: 3, mode: 0o666 }),
    );
    expect(planner.finish().specials).toEqual([
      expect.objectContaining({ op: 'mknod', rel: 'dev/null', kind: 'c', major: 1, minor: 3, mode: 0o666 }),
      { op: 'xattr', rel: 'bin/ping', name: 'user.note', value: Buffer.from('hi').toString('base64') },
      {
        op: 'xattr',
        rel: 'bin/ping',
        name: 'security.capability',
        value: Buffer.from([1]).toString('base64'),
      },
    ]);
  });
});

describe('layer planner: hard links', () => {
  it('links to a file this layer extracted', () => {
    expect(plan(entry('a'), entry('b', { type: 'link', linkname: 'a' })).steps[1]).toEqual([
      { op: 'link', rel: 'b', target: 'a' },
    ]);
  });

  it('copies a queued device node instead of linking to a file that does not exist yet', () => {
    const { planner, steps } = plan(
      entry('fifo', { type: 'fifo', size: 0 }),
      entry('again', { type: 'link', linkname: 'fifo' }),
    );
    expect(steps[1]).toEqual([]);
    expect(planner.finish().specials.map((s) => [s.op, s.rel])).toEqual([
      ['mknod', 'fifo'],
      ['mknod', 'again'],
    ]);
  });

  it('refuses links outside the layer, to directories and through symlinks', () => {
    refused([entry('h', { type: 'link', linkname: 'not/here' })], /points outside the layer/);
    refused([dir('d'), entry('h', { type: 'link', linkname: 'd' })], /points to a directory/);
    refused(
      [entry('s', { type: 'symlink', linkname: '/etc' }), entry('h', { type: 'link', linkname: 's/passwd' })],
      /goes through a symlink/,
    );
  });

  it('plans nothing for a link to itself', () => {
    expect(plan(entry('a'), entry('a', { type: 'link', linkname: 'a' })).steps[1]).toEqual([]);
  });
});

describe('layer planner: totals and directory times', () => {
  it('counts 4 KiB blocks per file and one per directory', () => {
    const { planner } = plan(dir('d'), entry('d/small', { size: 1 }), entry('d/big', { size: 4097 }));
    expect(planner.finish().totals.bytes).toBe(4096 + 4096 + 8192);
  });

  it('sets directory times deepest first, after everything inside them exists', () => {
    const { planner } = plan(
      dir('a', { mtime: 1 }),
      dir('a/b', { mtime: 2 }),
      dir('a/b/c', { mtime: 3 }),
      dir('z'),
    );
    expect(planner.finish().dirTimes.map(([rel]) => rel)).toEqual(['a/b/c', 'a/b', 'a', 'z']);
  });
});
