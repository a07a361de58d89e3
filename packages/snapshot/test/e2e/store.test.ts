import { randomBytes } from 'node:crypto';
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CacheFullError,
  createRepository,
  RuntimeCache,
  SnapshotCorruptError,
  SnapshotInvalidError,
  SnapshotNotFoundError,
  SnapshotStore,
  Workspace,
  type Repository,
} from '../../src/index.js';
import { blobKey } from '../../src/repository-keys.js';
import { eventually } from '@agentenv/test-support';
import { captureDigest, fileFixtures, randomPages, writeCapture } from '@agentenv/test-support/snapshot';

const PAGE = 4096;
const fx = fileFixtures();
const scratch = (tag: string) => fx.scratch(tag);

async function blobBytes(repo: Repository): Promise<number> {
  let n = 0;
  for await (const b of repo.listBlobs()) n += b.bytes;
  return n;
}

/** Writes raw bytes under a repository key, behind the library's back (to corrupt it). */
function rawPut(repo: Repository, key: string, data: Buffer): Promise<boolean> {
  return (repo as unknown as { putObject(k: string, b: Buffer, o: object): Promise<boolean> }).putObject(
    key,
    data,
    {
      exclusive: false,
    },
  );
}

const backends = [
  {
    name: 'posix_fs',
    make: async (tag: string) =>
      createRepository({ backend: 'posix_fs', path: await scratch(`store-${tag}`) }),
  },
  {
    name: 'oss',
    make: async (tag: string) =>
      createRepository(fx.s3.config(`s${process.pid}-${tag}-${randomBytes(3).toString('hex')}/`)),
  },
];

for (const b of backends) {
  describe(`snapshot store: ${b.name}`, () => {
    let repo: Repository;
    let store: SnapshotStore;
    let work: string;

    beforeAll(async () => {
      repo = await b.make('main');
      await repo.open();
      store = new SnapshotStore({ repository: repo, gcGraceMs: 0, lease: { pollMs: 20 } });
      work = await scratch('work');
    });
    afterAll(async () => {
      await repo.close();
    });

    it('stores only what changed and rebuilds every capture exactly', async () => {
      const pages = randomPages(1024); // 4 MiB of "memory"
      const state = randomBytes(300_001);
      const c1 = join(work, 'c1');
      await writeCapture(c1, { 'pages.img': pages, 'checkpoint.img': state });
      const s1 = await store.storeCapture(c1, {
        labels: { sandboxId: 'sbx1' },
        meta: { note: 'first' },
        aliases: ['first-pause'],
      });
      expect(s1.bytesTotal).toBe(pages.length + state.length);
      expect(s1.bytesWritten).toBeGreaterThanOrEqual(s1.bytesTotal);
      const afterFirst = await blobBytes(repo);

      // Second capture: two pages inserted early (the page file shifts), 64 KiB overwritten.
      const pages2 = Buffer.concat([
        pages.subarray(0, 7 * PAGE),
        randomBytes(2 * PAGE),
        pages.subarray(7 * PAGE, 600 * PAGE),
        randomBytes(16 * PAGE),
        pages.subarray(616 * PAGE),
      ]);
      const c2 = join(work, 'c2');
      await writeCapture(c2, { 'pages.img': pages2, 'checkpoint.img': state });
      const s2 = await store.storeCapture(c2, { parent: s1.snapshotId, labels: { sandboxId: 'sbx1' } });
      const growth = (await blobBytes(repo)) - afterFirst;
      expect(growth).toBe(s2.bytesWritten);
      expect(growth).toBeLessThan(0.25 * s1.bytesWritten);
      expect(s2.chunksWritten).toBeLessThan(s2.chunksTotal);
      expect(s2.record.parent).toBe(s1.snapshotId);

      // Nothing changed: only the manifest is new.
      const c3 = join(work, 'c3');
      await writeCapture(c3, { 'pages.img': pages2, 'checkpoint.img': state });
      const s3 = await store.storeCapture(c3, { parent: s2.snapshotId });
      expect(s3.chunksWritten).toBe(0);
      expect(s3.bytesWritten).toBeLessThan(20_000);

      for (const [s, src] of [
        [s1, c1],
        [s2, c2],
        [s3, c3],
      ] as const) {
        const out = join(work, `m-${s.snapshotId}`);
        const cap = await store.materialize(s.snapshotId, out);
        expect(cap.dir).toBe(out);
        expect(await captureDigest(out)).toEqual(await captureDigest(src));
        expect(cap.meta.files).toEqual(s.manifest.capture.files);
      }
      expect((await store.getRecord('first-pause')).id).toBe(s1.snapshotId);
      expect((await store.getRecord(s1.snapshotId)).meta).toEqual({ note: 'first' });
      const listed = await repo.listRecords({ labels: { sandboxId: 'sbx1' } });
      expect(listed.records.map((r) => r.id)).toEqual([s2.snapshotId, s1.snapshotId]);
      await expect(store.materialize(s1.snapshotId, join(work, `m-${s1.snapshotId}`))).rejects.toBeInstanceOf(
        SnapshotInvalidError,
      );
      await expect(store.materialize('nosuchsnapshot', join(work, 'x'))).rejects.toBeInstanceOf(
        SnapshotNotFoundError,
      );
    });

    it('refuses a corrupted or missing chunk and leaves no directory behind', async () => {
      const c = join(work, 'corrupt');
      await writeCapture(c, { 'pages.img': randomPages(64), 'checkpoint.img': randomBytes(1000) });
      const s = await store.storeCapture(c);
      // The first chunk: the content-defined chunker may cut 64 random pages into one chunk only.
      const [victim] = s.manifest.files.find((f) => f.name === 'pages.img')!.chunks[0]!;
      const good = await repo.readBlob(victim);
      const bad = Buffer.from(good);
      bad[100] = bad[100]! ^ 0xff;
      await rawPut(repo, blobKey(victim), bad);
      const dest = join(work, 'corrupt-out');
      const err = await store.materialize(s.snapshotId, dest).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SnapshotCorruptError);
      expect((err as Error).message).toMatch(/corrupted/);
      expect((await readdir(work)).filter((n) => n.startsWith('corrupt-out'))).toEqual([]);

      await repo.deleteBlob(victim);
      await expect(store.materialize(s.snapshotId, dest)).rejects.toThrow(/missing/);
      expect((await readdir(work)).filter((n) => n.startsWith('corrupt-out'))).toEqual([]);
      await repo.putBlob(victim, good);
      await store.materialize(s.snapshotId, dest);
      expect(await captureDigest(dest)).toEqual(await captureDigest(c));
    });

    it('refuses captures that are not complete', async () => {
      const c = join(work, 'incomplete');
      await writeCapture(c, { 'pages.img': randomPages(4) });
      await writeFile(join(c, 'pages.img'), randomPages(3));
      await expect(store.storeCapture(c)).rejects.toBeInstanceOf(SnapshotInvalidError);
      await expect(store.storeCapture(join(work, 'nothing-here'))).rejects.toBeInstanceOf(
        SnapshotInvalidError,
      );
    });

    it('stops a store when asked and commits nothing', async () => {
      const c = join(work, 'stopped');
      await writeCapture(c, { 'pages.img': randomPages(64) });
      const stop = new AbortController();
      stop.abort();
      await expect(
        store.storeCapture(c, { id: 'aenv-stopped000000000000001', signal: stop.signal }),
      ).rejects.toThrow(/aborted/);
      expect(await repo.getRecord('aenv-stopped000000000000001')).toBeNull();
    });

    it('collects the blobs only deleted snapshots used', async () => {
      const r = await b.make('gc');
      await r.open();
      const st = new SnapshotStore({ repository: r, gcGraceMs: 0, lease: { pollMs: 20 } });
      const shared = randomPages(256);
      const ca = join(work, 'gc-a');
      const cb = join(work, 'gc-b');
      await writeCapture(ca, { 'pages.img': Buffer.concat([shared, randomPages(256)]) });
      await writeCapture(cb, { 'pages.img': Buffer.concat([shared, randomPages(256)]) });
      const a = await st.storeCapture(ca, { aliases: ['gc-a'] });
      const bb = await st.storeCapture(cb);
      const before = await blobBytes(r);
      expect(await st.deleteSnapshot('gc-a', { collect: false })).toBe(true);
      expect(await st.deleteSnapshot('gc-a')).toBe(false);
      // A grace period keeps young unreferenced blobs.
      expect((await st.gc({ graceMs: 3_600_000 })).blobsDeleted).toBe(0);
      const report = await st.gc();
      expect(report.skipped).toBeUndefined();
      expect(report.blobsDeleted).toBeGreaterThan(0);
      const after = await blobBytes(r);
      // a's own half and its manifest are gone; the shared half stays for b.
      expect(before - after).toBeGreaterThan(256 * PAGE * 0.7);
      expect(before - after).toBeLessThan(256 * PAGE * 1.5);
      await st.materialize(bb.snapshotId, join(work, 'gc-b-out'));
      expect(await captureDigest(join(work, 'gc-b-out'))).toEqual(await captureDigest(cb));
      await expect(st.materialize(a.snapshotId, join(work, 'gc-a-out'))).rejects.toBeInstanceOf(
        SnapshotNotFoundError,
      );
      await r.close();
    });

    it('never collects while a capture is being stored, and a writer waits for a collection', async () => {
      const r = await b.make('lease');
      await r.open();
      const st = new SnapshotStore({ repository: r, gcGraceMs: 0, lease: { pollMs: 20 } });
      // A collection in progress (its lock) makes a writer wait until it is gone.
      await r.putLock('exclusive-00112233aabbccdd', {
        kind: 'exclusive',
        owner: 'test',
        expiresAt: Date.now() + 60_000,
      });
      const c = join(work, 'lease-1');
      await writeCapture(c, { 'pages.img': randomPages(64) });
      // The writer lists the locks again only while it waits: three listings with the
      // collection's lock in place, and the capture not stored, show it waiting.
      const listLocks = r.listLocks.bind(r);
      let listings = 0;
      r.listLocks = () => {
        listings++;
        return listLocks();
      };
      let stored = false;
      const storing = st.storeCapture(c);
      storing.then(
        () => (stored = true),
        () => undefined,
      );
      await eventually(() => expect(listings).toBeGreaterThanOrEqual(3), { intervalMs: 20 });
      expect(stored).toBe(false);
      r.listLocks = listLocks;
      await r.deleteLock('exclusive-00112233aabbccdd');
      const s = await storing;
      // A dead collector's lock (expired) blocks nobody.
      await r.putLock('exclusive-99887766aabbccdd', {
        kind: 'exclusive',
        owner: 'dead',
        expiresAt: Date.now() - 1,
      });
      const c2 = join(work, 'lease-2');
      await writeCapture(c2, { 'pages.img': randomPages(64) });
      await st.storeCapture(c2);
      expect((await r.listLocks()).map((l) => l.name)).toEqual([]);

      // A writer holding the repository makes a collection step aside.
      await st.deleteSnapshot(s.snapshotId, { collect: false });
      await r.putLock('shared-00112233aabbccdd', {
        kind: 'shared',
        owner: 'test',
        expiresAt: Date.now() + 60_000,
      });
      expect(await st.gc()).toMatchObject({ skipped: 'writer_active', blobsDeleted: 0 });
      await r.deleteLock('shared-00112233aabbccdd');
      expect((await st.gc()).blobsDeleted).toBeGreaterThan(0);
      await r.close();
    });
  });
}

describe('runtime cache and workspace', () => {
  let repo: Repository;
  let store: SnapshotStore;
  let work: string;
  const ids: string[] = [];
  const digests = new Map<string, Record<string, string>>();

  beforeAll(async () => {
    repo = createRepository({ backend: 'posix_fs', path: await scratch('cache-repo') });
    await repo.open();
    store = new SnapshotStore({ repository: repo });
    work = await scratch('cache-work');
    for (let i = 0; i < 4; i++) {
      const c = join(work, `cap${i}`);
      await writeCapture(c, { 'pages.img': randomPages(256) }); // 1 MiB each
      const s = await store.storeCapture(c);
      ids.push(s.snapshotId);
      digests.set(s.snapshotId, await captureDigest(c));
    }
  });

  afterAll(async () => {
    await repo.close();
  });

  it('stays within its byte bound, evicts the least recently used, never a pinned entry', async () => {
    const dir = join(work, 'cache1');
    const cache = new RuntimeCache({ dir, capacityBytes: 2.5 * 1024 * 1024, store });
    await cache.open();
    const [a, b, c, d] = ids as [string, string, string, string];
    const held = await cache.acquire(a);
    expect(await captureDigest(held.capture.dir)).toEqual(digests.get(a));
    await cache.get(b);
    expect(cache.usedBytes).toBeLessThanOrEqual(cache.capacityBytes);
    // Full: c must evict b (a is pinned although it is older).
    await cache.get(c);
    expect(cache.has(a)).toBe(true);
    expect(cache.has(b)).toBe(false);
    expect(cache.usedBytes).toBeLessThanOrEqual(cache.capacityBytes);
    // Both entries in use: a third one is refused, nothing is evicted.
    cache.pin(c);
    const err = await cache.get(d).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CacheFullError);
    expect((err as Error).message).toMatch(/is full: 2 snapshot\(s\) in use/);
    expect(cache.has(a) && cache.has(c)).toBe(true);
    expect((await readdir(dir)).sort()).toEqual([a, c].sort());
    // Released: rebuilt from the repository on demand.
    held.release();
    held.release(); // idempotent
    const cd = await cache.get(d);
    expect(await captureDigest(cd.dir)).toEqual(digests.get(d));
    expect(cache.has(a)).toBe(false);
    cache.unpin(c);
    const ca = await cache.get(a);
    expect(await captureDigest(ca.dir)).toEqual(digests.get(a));
    expect(cache.usedBytes).toBeLessThanOrEqual(cache.capacityBytes);
  });

  it('refuses an entry larger than the whole cache', async () => {
    const cache = new RuntimeCache({ dir: join(work, 'cache-small'), capacityBytes: 100_000, store });
    await cache.open();
    await expect(cache.get(ids[0]!)).rejects.toBeInstanceOf(CacheFullError);
    expect(await readdir(join(work, 'cache-small'))).toEqual([]);
  });

  it('re-indexes what a previous process left and drops incomplete entries', async () => {
    const dir = join(work, 'cache2');
    const first = new RuntimeCache({ dir, capacityBytes: 10 * 1024 * 1024, store });
    await first.open();
    await Promise.all([first.get(ids[0]!), first.get(ids[0]!), first.get(ids[1]!)]);
    await mkdir(join(dir, `${ids[2]}.partial-deadbeef`));
    await mkdir(join(dir, ids[3]!)); // no capture.json: incomplete
    const second = new RuntimeCache({ dir, capacityBytes: 10 * 1024 * 1024, store });
    await second.open();
    expect(
      second
        .stats()
        .entries.map((e) => e.id)
        .sort(),
    ).toEqual([ids[0], ids[1]].sort());
    expect((await readdir(dir)).sort()).toEqual([ids[0], ids[1]].sort());
    // A smaller bound at restart evicts down to it.
    const third = new RuntimeCache({ dir, capacityBytes: 1.5 * 1024 * 1024, store });
    await third.open();
    expect(third.stats().entries).toHaveLength(1);
    expect(await third.remove(third.stats().entries[0]!.id)).toBe(true);
    expect(await readdir(dir)).toEqual([]);
  });

  it('adopts a just-stored capture without copying, and workspaces clean up', async () => {
    const ws = new Workspace(join(work, 'ws'));
    await mkdir(join(work, 'ws', 'left-over'), { recursive: true });
    await ws.open();
    expect(await readdir(join(work, 'ws'))).toEqual([]);
    const cache = new RuntimeCache({ dir: join(work, 'cache3'), capacityBytes: 10 * 1024 * 1024, store });
    await cache.open();
    const stored = await ws.use(async (dir) => {
      await writeCapture(dir, { 'pages.img': randomPages(32) });
      const ino = (await stat(join(dir, 'pages.img'))).ino;
      const s = await store.storeCapture(dir);
      const cap = await cache.adopt(s.snapshotId, dir);
      expect((await stat(join(cap.dir, 'pages.img'))).ino).toBe(ino);
      return s;
    });
    expect(await readdir(join(work, 'ws'))).toEqual([]);
    expect(cache.has(stored.snapshotId)).toBe(true);
    await expect(
      ws.use(async (dir) => {
        await mkdir(dir);
        throw new Error('checkpoint failed');
      }),
    ).rejects.toThrow('checkpoint failed');
    expect(await readdir(join(work, 'ws'))).toEqual([]);
  });
});
