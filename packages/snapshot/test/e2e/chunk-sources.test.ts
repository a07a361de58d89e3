/**
 * The store's chunk sources: materialising takes chunks from the runtime cache and other sources
 * before the repository, checks every one against its hash, and falls back to the repository when
 * a source has nothing or lies.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CachedChunks,
  createRepository,
  RuntimeCache,
  SnapshotStore,
  type ChunkSession,
  type ChunkSource,
} from '../../src/index.js';
import { eventually } from '@agentenv/test-support';
import { captureDigest, fileFixtures, randomPages, writeCapture } from '@agentenv/test-support/snapshot';

const fx = fileFixtures();

function counting() {
  const fetched: Record<string, number> = {};
  const rejected: Record<string, number> = {};
  return {
    fetched,
    rejected,
    observer: {
      fetched: (s: string) => void (fetched[s] = (fetched[s] ?? 0) + 1),
      rejected: (s: string) => void (rejected[s] = (rejected[s] ?? 0) + 1),
    },
  };
}

async function setup() {
  const repository = createRepository({ backend: 'posix_fs', path: await fx.scratch('repo') });
  await repository.open();
  const store = new SnapshotStore({
    repository,
    chunking: { avgBytes: 32768, minBytes: 16384, maxBytes: 65536 },
  });
  const shared = randomPages(256);
  const src = await fx.scratch('cap');
  await writeCapture(src, { 'pages.img': Buffer.concat([shared, randomPages(16)]) });
  const first = await store.storeCapture(src);
  const src2 = await fx.scratch('cap2');
  await writeCapture(src2, { 'pages.img': Buffer.concat([shared, randomPages(16)]) });
  const second = await store.storeCapture(src2);
  const cache = new RuntimeCache({ dir: await fx.scratch('cache'), capacityBytes: 1 << 30, store });
  await cache.open();
  return { store, cache, first, second, digest: await captureDigest(src2) };
}

/** A source that answers every chunk with `answer(hash, bytes)`. */
function source(name: string, answer: (hash: string, bytes: number) => Buffer | null): ChunkSource {
  const session: ChunkSession = {
    get: (hash, bytes) => Promise.resolve(answer(hash, bytes)),
    rejected: () => undefined,
    end: () => undefined,
  };
  return { name, begin: () => Promise.resolve(session) };
}

describe('chunk sources when materialising', () => {
  it('takes the chunks a cached capture shares from the cache, the rest from the repository', async () => {
    const { store, cache, first, second, digest } = await setup();
    await cache.get(first.snapshotId);
    const c = counting();
    store.setChunkSources([new CachedChunks(cache, store)], c.observer);
    const out = await store.materialize(second.snapshotId, join(await fx.scratch('out'), 'capture'));
    expect(await captureDigest(out.dir)).toEqual(digest);
    expect(c.fetched.cache).toBeGreaterThan(0);
    expect(c.fetched.repository).toBeGreaterThan(0);
    expect(c.fetched.cache! + c.fetched.repository!).toBe(
      new Set(second.manifest.files[0]!.chunks.map(([h]) => h)).size,
    );
  });

  it('checks what a source gives against the hash and uses the repository instead', async () => {
    const { store, second, digest } = await setup();
    const c = counting();
    store.setChunkSources([source('liar', (_, bytes) => Buffer.alloc(bytes, 1))], c.observer);
    const out = await store.materialize(second.snapshotId, join(await fx.scratch('out-liar'), 'capture'));
    expect(await captureDigest(out.dir)).toEqual(digest);
    expect(c.rejected.liar).toBe(c.fetched.repository);
    expect(c.fetched.liar).toBeUndefined();
  });

  it('a source that has nothing or throws costs nothing but the repository read', async () => {
    const { store, second, digest } = await setup();
    const c = counting();
    const broken: ChunkSource = { name: 'broken', begin: () => Promise.reject(new Error('down')) };
    store.setChunkSources([broken, source('empty', () => null)], c.observer);
    const out = await store.materialize(second.snapshotId, join(await fx.scratch('out-empty'), 'capture'));
    expect(await captureDigest(out.dir)).toEqual(digest);
    expect(Object.keys(c.fetched)).toEqual(['repository']);
  });

  it('the cache serves only chunks it holds, with the right bytes, and lists them', async () => {
    const { store, cache, first, second } = await setup();
    await cache.get(first.snapshotId);
    const cached = new CachedChunks(cache, store);
    const [h0] = first.manifest.files[0]!.chunks[0]!;
    expect(await cached.has(h0)).toBe(true);
    expect((await cached.read(h0))?.length).toBe(first.manifest.files[0]!.chunks[0]![1]);
    const onlySecond = second.manifest.files[0]!.chunks.at(-1)![0];
    expect(await cached.has(onlySecond)).toBe(false);
    expect(await cached.read(onlySecond)).toBeNull();
    const [held] = await cached.sortedHashesByCapture();
    expect(held).toEqual([...new Set(first.manifest.files.flatMap((f) => f.chunks.map(([h]) => h)))].sort());
    await cache.remove(first.snapshotId);
    expect(await cached.has(h0)).toBe(false);
  });

  it('serves a capture cached before its snapshot was stored once the store commits', async () => {
    const { store, cache } = await setup();
    const dir = await fx.scratch('early');
    await writeCapture(dir, { 'pages.img': randomPages(64) });
    const id = 'aenv-early00000000000000001';
    await cache.adopt(id, dir);
    const cached = new CachedChunks(cache, store);
    expect(await cached.sortedHashesByCapture()).toEqual([]);
    const stored = await store.storeCapture(join(cache.dir, id), { id });
    const [h0] = stored.manifest.files[0]!.chunks[0]!;
    await eventually(async () => expect(await cached.has(h0)).toBe(true), { timeoutMs: 5_000 });
  });
});
