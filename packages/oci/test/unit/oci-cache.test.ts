import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LayerStore } from '../../src/layer-store.js';
import { LayerCache } from '../../src/cache.js';
import { LayerCacheFullError } from '../../src/errors.js';

let dir: string;
let store: LayerStore;
const index = () => join(dir, 'images', 'layer-cache.json');

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aenv-oci-cache-'));
  store = new LayerStore(join(dir, 'layers'));
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

/** Commits a layer of `kb` KiB and records it in the cache with a given last use. */
async function layer(cache: LayerCache, id: string, kb: number, lastUsed: number): Promise<void> {
  await store.ensure(id, { test: true }, (root) => writeFile(join(root, 'data'), Buffer.alloc(kb * 1024)));
  await cache.add(id, kb * 1024);
  (cache as unknown as { entries: Map<string, { lastUsed: number }> }).entries.get(id)!.lastUsed = lastUsed;
}

const present = async () => (await readdir(store.root)).filter((n) => n.startsWith('oci-')).sort();

describe('layer cache', () => {
  it('evicts least recently used layers first, only as many as needed', async () => {
    const cache = new LayerCache(store, index(), 300 * 1024);
    await cache.load();
    await layer(cache, 'oci-a', 100, 1);
    await layer(cache, 'oci-b', 100, 3);
    await layer(cache, 'oci-c', 100, 2);
    expect(await cache.makeRoom(100 * 1024)).toEqual(['oci-a']);
    expect(await present()).toEqual(['oci-b', 'oci-c']);
    await cache.touch(['oci-c']); // c is now the hottest
    expect(await cache.makeRoom(200 * 1024)).toEqual(['oci-b']);
    expect(await present()).toEqual(['oci-c']);
    expect(cache.usage()).toMatchObject({ usedBytes: 100 * 1024, layers: 1 });
  });

  it('never evicts pinned layers; strict room-making fails with a typed error', async () => {
    const cache = new LayerCache(store, index(), 250 * 1024);
    await cache.load();
    await layer(cache, 'oci-a', 100, 1);
    await layer(cache, 'oci-b', 100, 2);
    await cache.pin('template-1', ['oci-a', 'oci-b']);
    const err = await cache.makeRoom(100 * 1024, { strict: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LayerCacheFullError);
    expect(err).toMatchObject({ code: 'cache_full', capacityBytes: 250 * 1024, pinnedBytes: 200 * 1024 });
    expect((err as Error).message).toMatch(/held by pinned layers/);
    expect(await present()).toEqual(['oci-a', 'oci-b']);
    // a layer pinned by two owners stays until both let go
    await cache.pin('sandbox-9', ['oci-a'], { durable: false });
    await cache.unpin('template-1');
    expect(await cache.makeRoom(100 * 1024)).toEqual(['oci-b']);
    await cache.unpin('sandbox-9');
    expect(await cache.makeRoom(200 * 1024)).toEqual(['oci-a']);
    expect(await present()).toEqual([]);
  });

  it('persists sizes, use times and durable pins; adopts layers found without an entry', async () => {
    const cache = new LayerCache(store, index(), 1024 * 1024);
    await cache.load();
    await layer(cache, 'oci-a', 40, 5);
    await cache.touch([]); // saves the edited last use
    await cache.pin('template-1', ['oci-a']);
    await cache.pin('pull:x', ['oci-a'], { durable: false });
    await store.ensure('oci-orphan', {}, (root) => writeFile(join(root, 'f'), Buffer.alloc(64 * 1024)));
    await store.ensure('base-rootfs', {}, async () => undefined); // not an OCI layer: not managed

    const again = new LayerCache(store, index(), 1024 * 1024);
    await again.load();
    expect(again.has('oci-a')).toBe(true);
    expect(again.has('oci-orphan')).toBe(true);
    expect(again.has('base-rootfs')).toBe(false);
    expect(again.pins()).toEqual({ 'template-1': ['oci-a'] });
    const usage = again.usage();
    expect(usage.layers).toBe(2);
    expect(usage.usedBytes).toBeGreaterThanOrEqual(40 * 1024 + 64 * 1024);
    // the orphan (never used) goes before the pinned one
    const tiny = new LayerCache(store, index(), 50 * 1024);
    await tiny.load();
    expect(await tiny.makeRoom(0)).toEqual(['oci-orphan']);
    expect((await readdir(store.root)).filter((n) => n.startsWith('.tmp'))).toEqual([]);
  });

  it('a layer being evicted is waited for before a pull reuses the id', async () => {
    const cache = new LayerCache(store, index(), 0);
    await cache.load();
    await layer(cache, 'oci-a', 10, 1);
    const evicting = cache.makeRoom(0);
    await cache.settled('oci-a');
    expect(await store.has('oci-a')).toBe(false);
    await evicting;
  });
});
