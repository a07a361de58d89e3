import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { DomainError } from '@agentenv/common';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { VolumeFiles } from '../../src/volumes/content.js';
import { VolumeStore } from '../../src/volumes/store.js';

// Plain directories: loop-mounted images (the default) are the security suite's (volume-*.test.ts).
const PLAIN = { backing: 'directory' } as const;
const QUOTA = 1 << 20;
let dir: string;
let store: VolumeStore;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'aenv-volume-'));
  store = new VolumeStore(path.join(dir, 'volumes'), PLAIN);
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const kind = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (e: unknown) => (e instanceof DomainError ? e.kind : String(e)),
  );
const body = (s: string) => Readable.from([Buffer.from(s)]);

describe('VolumeStore', () => {
  it('creates, finds, reloads and destroys volumes; names are unique', async () => {
    const v = await store.create('data', QUOTA);
    expect(v.token.length).toBeGreaterThan(30);
    expect(await kind(store.create('data', QUOTA))).toBe('conflict');
    expect(await kind(store.create('../x', QUOTA))).toBe('invalid');
    const again = new VolumeStore(store.root, PLAIN);
    expect(again.list().map((x) => x.name)).toEqual(['data']);
    expect(again.get(v.volumeID).token).toBe(v.token);
    expect(await again.destroy(v.volumeID)).toBe(true);
    expect(await again.destroy(v.volumeID)).toBe(false);
    expect(new VolumeStore(store.root, PLAIN).list()).toEqual([]);
  });

  it('sees at once what another node sharing the root creates and destroys', async () => {
    const other = new VolumeStore(store.root, PLAIN);
    const v = await store.create('shared', QUOTA);
    expect(other.findByName('shared')?.volumeID).toBe(v.volumeID);
    expect(await kind(other.create('shared', QUOTA))).toBe('conflict');
    expect(await other.destroy(v.volumeID)).toBe(true);
    expect(() => store.get(v.volumeID)).toThrow(/not found/);
    expect(() => store.get('../secrets')).toThrow(/not found/);
  });

  it('authorises the content API with the volume token only', async () => {
    const a = await store.create('a', QUOTA);
    const b = await store.create('b', QUOTA);
    expect(store.authorize(a.volumeID, `Bearer ${a.token}`).name).toBe('a');
    for (const h of [undefined, '', `Bearer ${b.token}`, a.token, `Bearer ${a.token}x`])
      expect(() => store.authorize(a.volumeID, h)).toThrow(/volume token/);
    expect(() => store.authorize('nope', `Bearer ${a.token}`)).toThrow(/volume token/);
  });
});

describe('VolumeFiles', () => {
  const files = async (quota = 1 << 20) => {
    const v = await store.create('v', QUOTA);
    return { f: new VolumeFiles(store.dataDir(v), v.name, quota), root: store.dataDir(v) };
  };

  it('writes, stats, lists, reads and removes files and directories', async () => {
    const { f } = await files();
    const w = await f.write('/a/b/hello.txt', body('hi there'), {});
    expect(w).toMatchObject({ name: 'hello.txt', path: '/a/b/hello.txt', type: 'file', size: 8, uid: 1000 });
    expect(await text((await f.read('a/b/hello.txt')).stream)).toBe('hi there');
    expect(await kind(f.makeDir('/x/y', {}))).toBe('not_found');
    expect((await f.makeDir('/x/y', { force: true, mode: 0o700 })).mode).toBe(0o700);
    expect(await kind(f.makeDir('/x/y', {}))).toBe('conflict');
    expect((await f.list('/', 1)).map((e) => e.path).sort()).toEqual(['/a', '/x']);
    expect((await f.list('/', 3)).map((e) => e.path).sort()).toEqual([
      '/a',
      '/a/b',
      '/a/b/hello.txt',
      '/x',
      '/x/y',
    ]);
    expect((await f.updateMetadata('/a/b/hello.txt', { mode: 0o600, uid: 0 })).mode).toBe(0o600);
    await f.remove('/a');
    expect(await kind(f.stat('/a/b/hello.txt'))).toBe('not_found');
    expect(await kind(f.remove('/a'))).toBe('not_found');
    expect(await kind(f.remove('/'))).toBe('invalid');
  });

  it('refuses .. and never follows a symlink out of the volume', async () => {
    const { f, root } = await files();
    await writeFile(path.join(dir, 'secret'), 'host file');
    await symlink(path.join(dir, 'secret'), path.join(root, 'link'));
    await symlink(dir, path.join(root, 'outside'));
    expect(await kind(f.stat('/../secret'))).toBe('invalid');
    expect((await f.stat('/link')).type).toBe('symlink');
    expect(await kind(f.read('/link'))).toBe('invalid');
    expect(await kind(f.read('/outside/secret'))).toBe('invalid');
    expect(await kind(f.write('/outside/new', body('x'), {}))).toBe('invalid');
    expect(await kind(f.write('/link', body('x'), {}))).toBe('ok');
    expect(await readFile(path.join(dir, 'secret'), 'utf8')).toBe('host file');
  });

  it('enforces the quota and leaves nothing behind when a write would exceed it', async () => {
    const { f } = await files(1000);
    await f.write('/a', body('x'.repeat(600)), {});
    expect(await kind(f.write('/b', body('y'.repeat(600)), {}))).toBe('too_large');
    expect(await kind(f.write('/b', body('y'), { declaredBytes: 600 }))).toBe('too_large');
    // Overwriting a file frees its old bytes first.
    expect(await kind(f.write('/a', body('z'.repeat(900)), {}))).toBe('ok');
    expect((await f.list('/', 1)).map((e) => e.name)).toEqual(['a']);
    await expect(f.write('/b', body('y'.repeat(101)), {})).rejects.toThrow(
      'volume v would exceed its quota of 1000 bytes',
    );
  });
});
