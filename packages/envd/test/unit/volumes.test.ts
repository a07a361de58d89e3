import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkVolumeMounts, VolumeBinds } from '../../src/volumes.js';

const dir = mkdtempSync(join(tmpdir(), 'aenv-volumes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A fake of native/bind-mount.node that records its calls and answers `result`. */
function fakeAddon(result = 0) {
  const calls: [string, string][] = [];
  return { calls, bindMount: (source: string, target: string) => (calls.push([source, target]), result) };
}

describe('volume mounts at /init', () => {
  it('takes names and absolute paths, normalised', () => {
    expect(checkVolumeMounts(undefined)).toEqual([]);
    expect(checkVolumeMounts([{ name: 'data-1', path: '/mnt//data/' }])).toEqual([
      { name: 'data-1', path: '/mnt/data/' },
    ]);
  });

  it.each([
    ['not a list', { name: 'a', path: '/a' }],
    ['a name with a slash', [{ name: '../x', path: '/a' }]],
    ['an empty name', [{ name: '', path: '/a' }]],
    ['a relative path', [{ name: 'a', path: 'a' }]],
    ['a path with ..', [{ name: 'a', path: '/a/../etc' }]],
    ['a path with NUL', [{ name: 'a', path: '/a\0' }]],
  ])('refuses %s', (_what, mounts) => {
    expect(() => checkVolumeMounts(mounts)).toThrow(/volume/);
  });

  it('binds each volume from beneath the mount point once per path, making the path', () => {
    const addon = fakeAddon();
    const binds = new VolumeBinds(addon, '/.aenv-volumes');
    const target = join(dir, 'made', 'here');
    binds.bind([{ name: 'v', path: target }]);
    expect(statSync(target).isDirectory()).toBe(true);
    binds.bind([
      { name: 'v', path: target },
      { name: 'w', path: target },
    ]);
    expect(addon.calls).toEqual([
      ['/.aenv-volumes/v', target],
      ['/.aenv-volumes/w', target],
    ]);
  });

  it('says which volume failed and why', () => {
    const binds = new VolumeBinds(fakeAddon(-2), '/.aenv-volumes');
    expect(() => binds.bind([{ name: 'v', path: join(dir, 'x') }])).toThrow(
      /volume v could not be mounted at .*: ENOENT/,
    );
    expect(() => new VolumeBinds(null).bind([{ name: 'v', path: join(dir, 'y') }])).toThrow(
      /no bind-mount addon/,
    );
  });
});
