import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandboxRecord } from '@agentenv/test-support/fakes';
import { randomPages, scratchDir, writeCapture } from '@agentenv/test-support/snapshot';
import { RepositoryPauses } from '../../src/orchestrator/persistence/repository-pauses.js';
import { createRepository, RuntimeCache, SnapshotStore } from '../../src/snapshot/index.js';

/** Two nodes' RepositoryPauses over one posix repository, each with its own runtime cache. */
describe('pauses in the repository: claims', () => {
  let work: { dir: string; remove: () => Promise<void> };
  let a: RepositoryPauses;
  let b: RepositoryPauses;
  const claims = () => readdir(join(work.dir, 'repo', 'claims'));

  beforeAll(async () => {
    work = await scratchDir('pause-claims');
    const repository = createRepository({ backend: 'posix_fs', path: join(work.dir, 'repo') });
    await repository.open();
    const store = new SnapshotStore({ repository });
    const node = (name: string, secret: string) =>
      new RepositoryPauses(
        store,
        new RuntimeCache({ dir: join(work.dir, name), capacityBytes: 2 ** 26, store }),
        secret,
      );
    a = node('cache-a', 'secret-a');
    b = node('cache-b', 'secret-b');
  });
  afterAll(() => work.remove());

  async function capture(name: string): Promise<string> {
    const dir = join(work.dir, 'captures', name);
    await writeCapture(dir, { 'pages.img': randomPages(4) });
    return dir;
  }

  it('a stored pause is its node’s until released; then the first to claim it has it', async () => {
    const rec = sandboxRecord({ sandboxId: 'claimed1', state: 'paused' });
    const pauseId = await a.save(await capture('c1'), rec);
    expect((await b.findPaused('claimed1'))?.pauseId).toBe(pauseId);
    expect(await b.claim(pauseId)).toBe(false);
    expect(await a.claim(pauseId)).toBe(true);
    await a.release(pauseId);
    expect(await b.claim(pauseId)).toBe(true);
    expect(await a.claim(pauseId)).toBe(false);
    // A drops what it no longer holds only from its own cache: B runs the sandbox from it.
    await a.drop(pauseId);
    expect((await b.findPaused('claimed1'))?.pauseId).toBe(pauseId);
    await b.drop(pauseId);
    expect(await b.findPaused('claimed1')).toBeUndefined();
    expect(await claims()).toEqual([]);
  });

  it('a save that fails leaves no claim behind', async () => {
    const rec = sandboxRecord({ sandboxId: 'failed1', state: 'paused' });
    await expect(a.save(join(work.dir, 'captures', 'missing'), rec)).rejects.toThrow();
    expect(await claims()).toEqual([]);
    expect(await a.findPaused('failed1')).toBeUndefined();
  });
});
