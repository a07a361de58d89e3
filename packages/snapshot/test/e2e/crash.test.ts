import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRepository, SnapshotStore, type RepositoryConfig } from '../../src/index.js';
import { eventually, stressRounds } from '@agentenv/test-support';
import { fileFixtures, spawnChild, waitExit } from '@agentenv/test-support/snapshot';

/**
 * Crash consistency: writer processes commit (and delete, and collect garbage) in a loop and are
 * SIGKILLed at random moments, two at a time; afterwards every record in the repository must
 * have all its blobs and materialize, every name must point at a record, and every commit a
 * writer reported as done must still be there (unless it was being deleted).
 */
const fx = fileFixtures();

/** Each round kills two writers at a new random moment; AENV_TEST_STRESS=1 tries more of them. */
const ROUNDS = stressRounds(2, 8);

for (const backend of ['posix_fs', 'oss'] as const) {
  describe(`snapshot repository crash consistency: ${backend}`, () => {
    it('survives writers killed at random points', async () => {
      const repoDir = await fx.scratch('crash-repo');
      const work = { dir: await fx.scratch('crash-work') };
      const config: RepositoryConfig =
        backend === 'posix_fs'
          ? { backend, path: repoDir }
          : fx.s3.config(`crash-${process.pid}-${randomBytes(3).toString('hex')}/`);

      const committed = new Set<string>();
      const deleting = new Set<string>();
      let kills = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const children = [0, 1].map((i) =>
          spawnChild({ mode: 'loop', repo: config, work: work.dir, tag: `r${round}w${i}` }),
        );
        const exits = children.map(waitExit);
        // Let them get going (each prints once a commit is done), then kill at a random moment.
        await Promise.race([
          new Promise<void>((res) => children[0]!.stdout!.once('data', () => res())),
          new Promise((res) => setTimeout(res, 15_000)),
        ]);
        // The random delay is the test: the writers die at an arbitrary point of their work.
        await new Promise((res) => setTimeout(res, 100 + Math.random() * 2000));
        for (const c of children) c.kill('SIGKILL');
        for (const e of await Promise.all(exits)) {
          if (e.signal === 'SIGKILL') kills++;
          else expect.fail(`writer exited by itself (${e.code}): ${e.stderr}`);
          for (const line of e.stdout.split('\n')) {
            const [what, id] = line.split(' ');
            if (what === 'committed' && id) committed.add(id);
            if (what === 'deleting' && id) deleting.add(id);
          }
        }
      }
      expect(kills).toBe(2 * ROUNDS);
      expect(committed.size).toBeGreaterThanOrEqual(ROUNDS);

      const repo = createRepository(config);
      await repo.open();
      // Locks of killed writers expire after their ttl (5 s in the child): until then a
      // collection steps aside; then it must run and must not take anything a record needs.
      const store = new SnapshotStore({ repository: repo, gcGraceMs: 0, lease: { pollMs: 50 } });
      await eventually(async () => expect((await store.gc()).skipped).toBeUndefined(), {
        timeoutMs: 30_000,
        intervalMs: 500,
      });

      const records = (await repo.listRecords({}, { limit: 1000 })).records;
      const present = new Set(records.map((r) => r.id));
      for (const id of committed)
        if (!deleting.has(id)) expect(present.has(id), `commit ${id} lost`).toBe(true);
      for (const r of records) {
        const manifest = await store.readManifest(r);
        for (const f of manifest.files)
          for (const [h] of f.chunks) expect(await repo.hasBlob(h), `${r.id}: blob ${h}`).toBe(true);
        const out = join(work.dir, `check-${r.id}`);
        const cap = await store.materialize(r.id, out);
        expect(cap.meta.files).toEqual(manifest.capture.files);
      }
      for (const a of await repo.listAliases()) expect(present.has(a.id)).toBe(true);
      // Nothing partial was left where materialize builds.
      expect((await readdir(work.dir)).filter((n) => n.includes('.partial-'))).toEqual([]);
      await repo.close();
    }, 240_000);
  });
}
