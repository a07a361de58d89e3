import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRepository, RuntimeCache, SnapshotStore } from '@agentenv/snapshot';
import { RepositorySnapshotCatalog } from '../../src/sources/snapshots.js';
import { captureDigest, randomPages, writeCapture } from '@agentenv/test-support/snapshot';

/** /dev/shm is a tmpfs, a different filesystem from the temp dir's: a rename across fails with EXDEV. */
const OTHER_FS = '/dev/shm';
const ID_A = 'aenv-adopt0000000000000001';
const ID_B = 'aenv-adopt0000000000000002';
const ID_C = 'aenv-adopt0000000000000003';
const quiet = pino({ level: 'silent' });

const inodes = async (dir: string) => {
  const out: Record<string, { ino: number; nlink: number }> = {};
  for (const name of (await readdir(dir)).sort()) {
    const st = await stat(join(dir, name));
    out[name] = { ino: st.ino, nlink: st.nlink };
  }
  return out;
};

describe('runtime cache: adopting a capture taken on this node', () => {
  let work: string;
  let shm: string;
  let store: SnapshotStore;
  const cache = (capacityBytes = 16 * 1024 * 1024) =>
    new RuntimeCache({ dir: join(work, 'cache'), capacityBytes, store });

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'aenv-adopt-'));
    shm = await mkdtemp(join(existsSync(OTHER_FS) ? OTHER_FS : tmpdir(), 'aenv-adopt-'));
    const repository = createRepository({ backend: 'posix_fs', path: join(work, 'repo') });
    await repository.open();
    store = new SnapshotStore({ repository });
  });
  afterAll(async () => {
    await rm(work, { recursive: true, force: true });
    await rm(shm, { recursive: true, force: true });
  });

  it('on the same filesystem keeps the very files the checkpoint wrote: same inodes, one link each', async () => {
    const c = cache();
    await c.open();
    const dir = join(work, 'captures', 'pause-1');
    await writeCapture(dir, { 'pages.img': randomPages(64), 'checkpoint.img': randomPages(3) });
    const written = await inodes(dir);
    const capture = await c.adopt(ID_A, dir);
    expect(capture.dir).toBe(join(c.dir, ID_A));
    expect(await inodes(capture.dir)).toEqual(written);
    expect(Object.values(written).every((f) => f.nlink === 1)).toBe(true);
    expect(existsSync(dir)).toBe(false);
    // Every later restore gets the same directory, not a copy of it.
    expect((await c.get(ID_A)).dir).toBe(capture.dir);
    expect(await inodes((await c.acquire(ID_A)).capture.dir)).toEqual(written);
  });

  it('across filesystems copies once, into a complete entry, and removes the source', async () => {
    const s = await stat(shm);
    if (s.dev === (await stat(work)).dev) {
      console.warn(`[snapshot-cache-adopt] EXDEV case SKIPPED: ${OTHER_FS} is not a separate filesystem`);
      return;
    }
    const c = cache();
    await c.open();
    const dir = join(shm, 'pause-2');
    await writeCapture(dir, { 'pages.img': randomPages(32) });
    const digest = await captureDigest(dir);
    const capture = await c.adopt(ID_B, dir);
    expect(await captureDigest(capture.dir)).toEqual(digest);
    expect(existsSync(dir)).toBe(false);
    expect((await readdir(c.dir)).filter((n) => n.includes('.partial-'))).toEqual([]);
    // The index a restarted node rebuilds agrees: the copy is a complete capture.
    const reopened = cache();
    await reopened.open();
    expect(reopened.has(ID_B)).toBe(true);
  });

  it('offer() leaves the capture where it is when the cache has no room', async () => {
    const c = cache(64 * 1024);
    await c.open();
    const dir = join(work, 'captures', 'pause-3');
    await writeCapture(dir, { 'pages.img': randomPages(32) });
    const written = await inodes(dir);
    expect(await c.offer(ID_C, dir)).toBe(false);
    expect(await inodes(dir)).toEqual(written);
    expect(c.has(ID_C)).toBe(false);
  });

  it('a snapshot stands when the cache is full: stored before the answer, and rebuilt from the repository on first use', async () => {
    const c = cache(64 * 1024);
    const catalog = await RepositorySnapshotCatalog.open(store, c, join(work, 'held'), quiet);
    const dir = join(work, 'captures', 'snapshot-4');
    await writeCapture(dir, { 'pages.img': randomPages(32) });
    const digest = await captureDigest(dir);
    const { info } = await catalog.take(dir, {
      names: [],
      sourceSandboxId: 'sbx-full-cache',
      templateId: 'base',
      cpuCount: 1,
      memoryMB: 512,
      diskSizeMB: 512,
      envdVersion: '0.0.0',
    });
    expect(info.stored).toBe(true);
    expect(c.has(info.snapshotID)).toBe(false);
    expect((await catalog.list({ sandboxId: 'sbx-full-cache' })).map((s) => s.snapshotID)).toEqual([
      info.snapshotID,
    ]);
    const roomy = await RepositorySnapshotCatalog.open(store, cache(), join(work, 'held'), quiet);
    const found = await roomy.find(info.snapshotID);
    expect(await captureDigest(found!.capture.dir)).toEqual(digest);
    found!.release?.();
  });
});
