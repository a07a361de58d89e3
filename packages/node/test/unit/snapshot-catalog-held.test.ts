import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRepository, RuntimeCache, SnapshotStore, type Repository } from '@agentenv/snapshot';
import { RepositorySnapshotCatalog } from '../../src/sources/snapshots.js';
import { captureDigest, randomPages, writeCapture } from '@agentenv/test-support/snapshot';

const quiet = pino({ level: 'silent' });
const BASE = {
  sourceSandboxId: 'sbx-held',
  templateId: 'base',
  cpuCount: 1,
  memoryMB: 512,
  diskSizeMB: 512,
  envdVersion: '0.0.0',
};

/** A real repository whose commits wait until `open()` is called, or fail while `down`. */
function gated(repo: Repository) {
  let release: () => void = () => undefined;
  let gate = Promise.resolve();
  const state = { down: false };
  const wrapped = new Proxy(repo, {
    get(target, prop, receiver) {
      if (prop === 'commit')
        return async (...args: Parameters<Repository['commit']>) => {
          await gate;
          if (state.down) throw new Error('repository down');
          return target.commit(...args);
        };
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return {
    repository: wrapped,
    state,
    close: () => (gate = new Promise<void>((r) => (release = r))),
    open: () => release(),
  };
}

describe('snapshots answered before they are stored', () => {
  let work: string;
  let gate: ReturnType<typeof gated>;
  let store: SnapshotStore;
  let n = 0;

  const catalog = () =>
    RepositorySnapshotCatalog.open(
      store,
      new RuntimeCache({ dir: join(work, 'cache'), capacityBytes: 64 * 2 ** 20, store }),
      join(work, 'held'),
      quiet,
    );
  const capture = async () => {
    const dir = join(work, 'captures', `c${++n}`);
    await writeCapture(dir, { 'pages.img': randomPages(16) });
    return { dir, digest: await captureDigest(dir) };
  };

  beforeEach(async () => {
    work = await mkdtemp(join(tmpdir(), 'aenv-held-'));
    const repo = createRepository({ backend: 'posix_fs', path: join(work, 'repo') });
    await repo.open();
    gate = gated(repo);
    store = new SnapshotStore({ repository: gate.repository });
  });
  afterEach(async () => {
    gate.open();
    await rm(work, { recursive: true, force: true });
  });

  it('starts from a snapshot at once on this node, and lists it stored once the repository holds it', async () => {
    const cat = await catalog();
    const { dir, digest } = await capture();
    gate.close();
    const taken = await cat.take(dir, { ...BASE, names: ['held-one'] });
    expect(taken.info.stored).toBe(false);
    expect(await cat.info(taken.info.snapshotID)).toMatchObject({ names: ['held-one'], stored: false });
    expect(existsSync(dir)).toBe(false);
    const found = await cat.find('held-one');
    expect(await captureDigest(found!.capture.dir)).toEqual(digest);
    found!.release?.();
    expect((await cat.list({})).map((s) => [s.snapshotID, s.stored])).toEqual([
      [taken.info.snapshotID, false],
    ]);
    expect(await store.repository.getRecord(taken.info.snapshotID)).toBeNull();

    gate.open();
    await taken.stored;
    expect((await cat.list({ name: 'held-one' })).map((s) => [s.snapshotID, s.stored])).toEqual([
      [taken.info.snapshotID, true],
    ]);
    expect(await cat.info('held-one')).toMatchObject({ snapshotID: taken.info.snapshotID, stored: true });
    expect(await readdir(join(work, 'held'))).toEqual([]);
  });

  it('a name held but not stored yet is taken: a second snapshot with it is refused', async () => {
    const cat = await catalog();
    gate.close();
    const first = await cat.take((await capture()).dir, { ...BASE, names: ['twice'] });
    await expect(cat.take((await capture()).dir, { ...BASE, names: ['twice'] })).rejects.toThrow(
      /already belongs/,
    );
    gate.open();
    await first.stored;
  });

  it('after a crash, the next start lists what was held and stores it', async () => {
    const first = await catalog();
    const { dir, digest } = await capture();
    gate.state.down = true;
    const taken = await first.take(dir, { ...BASE, names: ['survivor'] });
    await expect(taken.stored).rejects.toThrow(/repository down/);

    gate.state.down = false;
    const again = await catalog();
    expect((await again.list({})).map((s) => [s.snapshotID, s.stored])).toEqual([
      [taken.info.snapshotID, false],
    ]);
    const found = await again.find(taken.info.snapshotID);
    expect(await captureDigest(found!.capture.dir)).toEqual(digest);
    found!.release?.();
    const left = again.storeLeftovers();
    expect(left.map((t) => t.info.snapshotID)).toEqual([taken.info.snapshotID]);
    await left[0]!.stored;
    expect((await again.find('survivor'))!.info.stored).toBe(true);
  });

  it('a snapshot deleted while it is being stored is gone from this node and from the repository', async () => {
    const cat = await catalog();
    gate.close();
    const taken = await cat.take((await capture()).dir, { ...BASE, names: ['short-lived'] });
    expect(await cat.delete('short-lived')).toBe(true);
    expect(await cat.find(taken.info.snapshotID)).toBeUndefined();
    gate.open();
    await taken.stored;
    expect(await store.repository.getRecord(taken.info.snapshotID)).toBeNull();
    expect(await cat.list({})).toEqual([]);
    expect(await readdir(join(work, 'cache'))).toEqual([]);
  });
});
