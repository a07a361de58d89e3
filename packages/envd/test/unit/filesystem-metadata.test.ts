import { mkdtemp, rm, writeFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as xattr from '@napi-rs/xattr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MetadataStore,
  metadataFromHeaders,
  metadataProblem,
  xattrErrno,
  type XattrApi,
} from '../../src/filesystem/metadata.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'envd-meta-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('metadata validation', () => {
  it('refuses what E2B envd refuses', () => {
    expect(metadataProblem({ a: 'b', 'x-y_z.1': 'printable ~ value' })).toBeUndefined();
    expect(metadataProblem({ '': 'v' })).toMatch(/empty/);
    expect(metadataProblem({ k: 'line\nbreak' })).toMatch(/not printable/);
    expect(metadataProblem({ ké: 'v' })).toMatch(/not printable/);
    expect(metadataProblem({ ['k'.repeat(247)]: 'v' })).toMatch(/exceeds 246/);
    expect(metadataProblem({ a: 'v'.repeat(4090) })).toMatch(/total metadata size/);
  });

  it('reads X-Metadata-* headers, lowercasing keys', () => {
    expect(
      metadataFromHeaders({
        'x-metadata-Author': ['mish', 'second'],
        'X-METADATA-purpose': ['upload'],
        'x-metadata-': ['ignored'],
        'content-type': ['text/plain'],
      }),
    ).toEqual({ author: 'mish', purpose: 'upload' });
    expect(() => metadataFromHeaders({ 'x-metadata-k': ['bad\u0001'] })).toThrow(/invalid metadata/);
  });

  it('extracts the errno of @napi-rs/xattr failures', () => {
    expect(xattrErrno(new Error('Operation not supported (os error 95)'))).toBe(95);
    expect(xattrErrno(new Error('whatever'))).toBeUndefined();
  });
});

describe('MetadataStore on xattrs', () => {
  const store = new MetadataStore();

  it('stores user.e2b.<key> attributes and replaces the whole set', async () => {
    const f = path.join(dir, 'x.txt');
    await writeFile(f, 'x');
    await xattr.setAttribute(f, 'user.other', 'kept');
    await store.write(f, { author: 'mish', purpose: 'upload' });
    expect(String(await xattr.getAttribute(f, 'user.e2b.author'))).toBe('mish');
    expect(await store.read(f)).toEqual({ author: 'mish', purpose: 'upload' });
    await store.write(f, { purpose: 'again' });
    expect(await store.read(f)).toEqual({ purpose: 'again' });
    await store.write(f, {});
    expect(await store.read(f)).toEqual({});
    expect(String(await xattr.getAttribute(f, 'user.other'))).toBe('kept');
  });

  it('shows attributes set from inside the sandbox, skipping non-UTF-8 values', async () => {
    const f = path.join(dir, 'y.txt');
    await writeFile(f, 'y');
    await xattr.setAttribute(f, 'user.e2b.tag', 'set-by-setfattr');
    await xattr.setAttribute(f, 'user.e2b.bin', Buffer.from([0xff, 0xfe]));
    expect(await store.read(f)).toEqual({ tag: 'set-by-setfattr' });
  });

  it('reads nothing for a missing file', async () => {
    expect(await store.read(path.join(dir, 'missing'))).toEqual({});
  });

  it('rejects invalid sets before touching the file', async () => {
    await expect(store.write(path.join(dir, 'x.txt'), { '': 'v' })).rejects.toThrow(/invalid metadata/);
  });
});

describe('MetadataStore fallback when xattrs are unsupported', () => {
  const unsupported = () => Promise.reject(new Error('Operation not supported (os error 95)'));
  const noXattrs: XattrApi = {
    listAttributes: unsupported,
    getAttribute: unsupported,
    setAttribute: unsupported,
    removeAttribute: unsupported,
  };
  const store = new MetadataStore(noXattrs);

  it('keeps metadata per inode, following renames', async () => {
    const f = path.join(dir, 'side.txt');
    await writeFile(f, 's');
    await store.write(f, { k: 'v' });
    expect(await store.read(f)).toEqual({ k: 'v' });
    const g = path.join(dir, 'side-renamed.txt');
    await rename(f, g);
    expect(await store.read(g)).toEqual({ k: 'v' });
    await store.write(g, {});
    expect(await store.read(g)).toEqual({});
  });

  it('reports storage exhaustion as insufficient_storage', async () => {
    const full = new MetadataStore({
      ...noXattrs,
      listAttributes: async () => [],
      setAttribute: () => Promise.reject(new Error('No space left on device (os error 28)')),
    });
    const f = path.join(dir, 'full.txt');
    await writeFile(f, 'f');
    await expect(full.write(f, { k: 'v' })).rejects.toMatchObject({ kind: 'insufficient_storage' });
  });
});
