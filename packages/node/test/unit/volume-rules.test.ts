import { DomainError } from '@agentenv/common';
import { describe, expect, it } from 'vitest';
import {
  checkMountList,
  checkMountPath,
  checkVolumeName,
  displayPath,
  volumeRelativePath,
} from '../../src/volumes/rules.js';

const refused = (f: () => unknown, text: string) => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    expect((e as DomainError).kind).toBe('invalid');
    expect((e as Error).message).toContain(text);
    return;
  }
  throw new Error('expected a refusal');
};

describe('volume names', () => {
  it('accepts short names of letters, digits, dashes and underscores', () => {
    for (const n of ['data', 'a', 'my-vol_2', 'X'.repeat(63)]) expect(checkVolumeName(n)).toBe(n);
  });
  it('refuses empty, long, dotted, slashed or leading-dash names', () => {
    for (const n of ['', 'x'.repeat(64), '../etc', 'a/b', '.hidden', '-x', 'a b', 'é'])
      refused(() => checkVolumeName(n), 'invalid volume name');
  });
});

describe('content paths', () => {
  it('resolves absolute and relative paths to segments inside the volume', () => {
    expect(volumeRelativePath('/')).toEqual([]);
    expect(volumeRelativePath('/a/b.txt')).toEqual(['a', 'b.txt']);
    expect(volumeRelativePath('a//./b/')).toEqual(['a', 'b']);
    expect(displayPath(['a', 'b'])).toBe('/a/b');
    expect(displayPath([])).toBe('/');
  });
  it('refuses .. anywhere, NUL bytes and empty paths', () => {
    for (const p of ['..', '/../x', '/a/../../b', 'a/..', '/a/..'])
      refused(() => volumeRelativePath(p), "'..'");
    refused(() => volumeRelativePath('a\0b'), 'NUL');
    refused(() => volumeRelativePath(''), 'required');
    refused(() => volumeRelativePath('/' + 'x'.repeat(256)), 'too long');
  });
  it('keeps names that merely contain dots', () => {
    expect(volumeRelativePath('/a..b/...')).toEqual(['a..b', '...']);
  });
});

describe('mount paths', () => {
  it('accepts absolute paths outside the system trees', () => {
    expect(checkMountPath('/data')).toBe('/data');
    expect(checkMountPath('/home/user/work/')).toBe('/home/user/work');
    expect(checkMountPath('/devices')).toBe('/devices');
    expect(checkMountPath('/mnt//vol')).toBe('/mnt/vol');
  });
  it('refuses relative paths, the root, .. and the kernel and tools trees', () => {
    refused(() => checkMountPath('data'), 'not absolute');
    refused(() => checkMountPath('/'), 'mounted at /');
    refused(() => checkMountPath('/a/../proc'), "'..'");
    for (const p of ['/a\nb', '/a\rb', '/a\tb', '/a\0b'])
      refused(() => checkMountPath(p), 'control character');
    for (const p of ['/proc', '/proc/self', '/sys/fs', '/dev', '/dev/shm', '/opt/aenv-tools/bin'])
      refused(() => checkMountPath(p), 'is under');
  });
  it('refuses two volumes at one path and too many mounts', () => {
    refused(
      () =>
        checkMountList(
          [
            { name: 'a', path: '/x' },
            { name: 'b', path: '/x/' },
          ],
          4,
        ),
      'two volumes are mounted at /x',
    );
    refused(
      () =>
        checkMountList(
          [
            { name: 'a', path: '/x' },
            { name: 'b', path: '/y' },
          ],
          1,
        ),
      'at most 1',
    );
  });
});
