import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { readdir } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AliasTakenError,
  createRepository,
  S3Repository,
  RepositoryConfigError,
  RepositoryUnavailableError,
  SnapshotCorruptError,
  SnapshotInvalidError,
  type Repository,
  type SnapshotRecord,
} from '../../src/index.js';
import { collect } from '../../src/repository-objects.js';
import { eventually } from '@agentenv/test-support';
import { fileFixtures, spawnChild, waitExit } from '@agentenv/test-support/snapshot';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
let seq = 0;

function record(id: string, manifest: string, extra: Partial<SnapshotRecord> = {}): SnapshotRecord {
  return {
    format: 'aenv-snapshot/1',
    id,
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, seq++)).toISOString(),
    labels: {},
    meta: {},
    manifest,
    bytesTotal: 0,
    ...extra,
  };
}

const fx = fileFixtures();

interface Backend {
  name: string;
  make: (tag: string, opts?: Record<string, unknown>) => Promise<Repository>;
}

const backends: Backend[] = [
  {
    name: 'posix_fs',
    make: async (tag, opts = {}) => {
      return createRepository({ backend: 'posix_fs', path: await fx.scratch(`repo-${tag}`), ...opts });
    },
  },
  {
    name: 'oss',
    make: async (tag, opts = {}) =>
      createRepository(fx.s3.config(`t${process.pid}-${tag}-${randomBytes(3).toString('hex')}/`, opts)),
  },
];

for (const b of backends) {
  describe(`snapshot repository: ${b.name}`, () => {
    let repo: Repository;
    beforeAll(async () => {
      repo = await b.make('main');
      await repo.open();
    });
    afterAll(async () => {
      await repo.close();
    });

    it('stores content-addressed blobs from bytes, streams and files, and checks their hash', async () => {
      const data = randomBytes(100_000);
      const h = sha(data);
      expect(await repo.hasBlob(h)).toBe(false);
      await repo.putBlob(h, data);
      expect(await repo.hasBlob(h)).toBe(true);
      expect((await collect(await repo.getBlob(h))).equals(data)).toBe(true);
      expect((await repo.readBlob(h)).equals(data)).toBe(true);

      const streamed = randomBytes(70_000);
      await repo.putBlob(sha(streamed), Readable.from([streamed.subarray(0, 1000), streamed.subarray(1000)]));
      expect((await repo.readBlob(sha(streamed))).equals(streamed)).toBe(true);

      const dir = await fx.scratch('blobfile');
      const file = `${dir}/f`;
      const fileData = randomBytes(300_000);
      await import('node:fs/promises').then((fs) => fs.writeFile(file, fileData));
      await repo.putBlob(sha(fileData), { path: file });
      expect((await repo.readBlob(sha(fileData))).equals(fileData)).toBe(true);

      await expect(repo.putBlob(sha(data), randomBytes(10))).rejects.toBeInstanceOf(SnapshotInvalidError);
      expect((await repo.readBlob(h)).equals(data)).toBe(true);
      await expect(repo.putBlob('nothex', data)).rejects.toBeInstanceOf(SnapshotInvalidError);

      const listed = new Map<string, number>();
      for await (const x of repo.listBlobs()) listed.set(x.hash, x.bytes);
      expect(listed.get(h)).toBe(100_000);
      expect(listed.get(sha(fileData))).toBe(300_000);

      await repo.deleteBlob(h);
      expect(await repo.hasBlob(h)).toBe(false);
      await expect(repo.getBlob(h)).rejects.toBeInstanceOf(SnapshotCorruptError);
      await repo.deleteBlob(h); // deleting twice is fine
    });

    it('commits records with names, lists them newest first with filters and pages', async () => {
      const m = sha(Buffer.from('manifest'));
      const ids = Array.from({ length: 7 }, (_, i) => `rec${i}${randomBytes(3).toString('hex')}`);
      for (const [i, id] of ids.entries()) {
        await repo.commit(
          record(id, m, { labels: { sandboxId: i % 2 ? 'odd' : 'even' } }),
          i === 0 ? ['first', 'dir/with space'] : [],
        );
      }
      expect((await repo.getRecord(ids[3]!))?.labels.sandboxId).toBe('odd');
      expect(await repo.getRecord('nope')).toBeNull();
      expect(await repo.resolveAlias('first')).toBe(ids[0]);
      expect(await repo.resolveAlias('dir/with space')).toBe(ids[0]);
      expect((await repo.listAliases(ids[0])).map((a) => a.name).sort()).toEqual(['dir/with space', 'first']);

      const p1 = await repo.listRecords({}, { limit: 3 });
      expect(p1.records.map((r) => r.id)).toEqual([ids[6], ids[5], ids[4]]);
      const p2 = await repo.listRecords({}, { limit: 3, nextToken: p1.nextToken! });
      expect(p2.records.map((r) => r.id)).toEqual([ids[3], ids[2], ids[1]]);
      const p3 = await repo.listRecords({}, { limit: 3, nextToken: p2.nextToken! });
      expect(p3.records.map((r) => r.id)).toEqual([ids[0]]);
      expect(p3.nextToken).toBeUndefined();
      const odd = await repo.listRecords({ labels: { sandboxId: 'odd' } });
      expect(odd.records.map((r) => r.id)).toEqual([ids[5], ids[3], ids[1]]);
      expect((await repo.listRecords({ alias: 'first' })).records.map((r) => r.id)).toEqual([ids[0]]);

      // A name held by an existing snapshot is refused and nothing is published.
      await expect(repo.commit(record('clash1', m), ['fresh-name', 'first'])).rejects.toBeInstanceOf(
        AliasTakenError,
      );
      expect(await repo.getRecord('clash1')).toBeNull();
      expect(await repo.resolveAlias('fresh-name')).toBeNull();
      // The same id twice is refused.
      await expect(repo.commit(record(ids[1]!, m))).rejects.toMatchObject({ code: 'exists' });
      // Retrying a commit that got through (e.g. its answer was lost) succeeds.
      const again = record('again1', m);
      await repo.commit(again, ['again-name']);
      await repo.commit(again, ['again-name']);
      expect(await repo.resolveAlias('again-name')).toBe('again1');

      await repo.setAlias('moving', ids[1]!);
      await repo.setAlias('moving', ids[2]!);
      expect(await repo.resolveAlias('moving')).toBe(ids[2]);
      expect(await repo.deleteAlias('moving')).toBe(true);
      expect(await repo.resolveAlias('moving')).toBeNull();

      expect(await repo.deleteRecord(ids[0]!)).toBe(true);
      expect(await repo.deleteRecord(ids[0]!)).toBe(false);
      expect(await repo.getRecord(ids[0]!)).toBeNull();
      expect(await repo.resolveAlias('first')).toBeNull();
      // Its names are free again.
      await repo.commit(record('reuse1', m), ['first']);
      expect(await repo.resolveAlias('first')).toBe('reuse1');
    });

    it('replaces a stale claim left by a crashed commit, but not a fresh one', async () => {
      const r2 = await b.make('stale', { staleAliasMs: 2000 });
      await r2.open();
      const m = sha(Buffer.from('m'));
      // A commit that claimed its name and died before writing its record: simulated by
      // removing the record object behind the library's back.
      await r2.commit(record('ghost2', m), ['orphan']);
      const internal = r2 as unknown as { deleteObject(k: string): Promise<void> };
      await internal.deleteObject('records/ghost2.json');
      expect(await r2.resolveAlias('orphan')).toBeNull();
      await expect(r2.commit(record('new1', m), ['orphan'])).rejects.toBeInstanceOf(AliasTakenError);
      // Time passing is the point: the claim is replaced once it aged past staleAliasMs (2 s), as
      // seen by the store's modification times (s3rver's LastModified has 1 s resolution).
      await eventually(() => r2.commit(record('new2', m), ['orphan']), {
        timeoutMs: 10_000,
        intervalMs: 200,
      });
      expect(await r2.resolveAlias('orphan')).toBe('new2');
      await r2.close();
    });

    it('lets exactly one of many concurrent commits take a name', async () => {
      // s3rver ignores If-None-Match: the check-write-verify fallback is what is exercised.
      if (repo instanceof S3Repository) expect(repo.conditionalWrites).toBe(false);
      const m = sha(Buffer.from('x'));
      const results = await Promise.allSettled(
        Array.from({ length: 24 }, (_, i) =>
          repo.commit(record(`race${i}${randomBytes(2).toString('hex')}`, m), ['contested']),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(AliasTakenError);
      const owner = await repo.resolveAlias('contested');
      expect(owner).not.toBeNull();
      // Losers left nothing behind.
      const all = await repo.listRecords({}, { limit: 1000 });
      expect(all.records.filter((r) => r.id.startsWith('race')).map((r) => r.id)).toEqual([owner]);
    });

    it('gives a claim to exactly one owner, until it is deleted', async () => {
      const name = `pause/claim${randomBytes(3).toString('hex')}`;
      const owners = Array.from({ length: 12 }, (_, i) => `node-${i}`);
      // Racing owners need an atomic exclusive create: posix link(), or S3 If-None-Match, which
      // s3rver lacks (its check-write-verify fallback can let a late writer replace the holder).
      const atomic = !(repo instanceof S3Repository) || repo.conditionalWrites;
      const holders = atomic
        ? await Promise.all(owners.map((o) => repo.claim(name, o)))
        : await owners.reduce<Promise<string[]>>(
            async (acc, o) => [...(await acc), await repo.claim(name, o)],
            Promise.resolve([]),
          );
      const winner = holders[0]!;
      expect(new Set(holders)).toEqual(new Set([winner]));
      expect(await repo.claim(name, winner)).toBe(winner);
      await repo.deleteClaim(name);
      await repo.deleteClaim(name);
      expect(await repo.claim(name, 'node-late')).toBe('node-late');
      await repo.deleteClaim(name);
    });

    it('keeps two writer processes committing at once consistent', async () => {
      const work = await fx.scratch('race-work');
      const r3 = await b.make('procs');
      await r3.open();
      const config =
        r3 instanceof S3Repository
          ? fx.s3.config(r3.location.replace(`s3://${fx.s3.bucket}/`, ''))
          : { backend: 'posix_fs', path: r3.location };
      const children = [0, 1].map((i) =>
        spawnChild({ mode: 'race', repo: config, work, count: 6, alias: 'shared-name', tag: `w${i}` }),
      );
      const outs = await Promise.all(children.map(waitExit));
      for (const o of outs) expect(o.code, o.stderr).toBe(0);
      const lines = outs.flatMap((o) =>
        o.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { id?: string; ok: boolean; code?: string }),
      );
      expect(lines).toHaveLength(12);
      // One capture got the name; every other one failed on it (posix: exactly; s3rver ignores
      // If-None-Match, so its read-back check is what decides).
      const winners = lines.filter((l) => l.ok);
      expect(winners).toHaveLength(1);
      for (const l of lines.filter((x) => !x.ok)) expect(l.code, JSON.stringify(l)).toBe('alias_taken');
      expect(await r3.resolveAlias('shared-name')).toBe(winners[0]!.id);
      const listed = await r3.listRecords({}, { limit: 1000 });
      expect(listed.records.map((r) => r.id)).toEqual([winners[0]!.id]);
      await r3.close();
    }, 120_000);

    it('lists more blobs than one listing page holds', async () => {
      const r4 = await b.make('many');
      await r4.open();
      const blobs = Array.from({ length: 1100 }, (_, i) => Buffer.from(`blob ${i}`));
      const { forEachLimit } = await import('@agentenv/common');
      await forEachLimit(blobs, 16, async (x) => {
        await r4.putBlob(sha(x), x);
      });
      const seen = new Set<string>();
      for await (const x of r4.listBlobs()) seen.add(x.hash);
      expect(seen.size).toBe(1100);
      await r4.close();
    }, 120_000);

    it('keeps lock objects listable and deletable', async () => {
      await repo.putLock('shared-0011223344556677', {
        kind: 'shared',
        owner: 'x',
        expiresAt: Date.now() + 1000,
      });
      expect((await repo.listLocks()).map((l) => l.name)).toContain('shared-0011223344556677');
      await repo.deleteLock('shared-0011223344556677');
      expect((await repo.listLocks()).map((l) => l.name)).not.toContain('shared-0011223344556677');
    });
  });
}

describe('snapshot repository: errors', () => {
  it('refuses an oss configuration without a region', () => {
    expect(() => createRepository({ ...fx.s3.config('x/'), region: '' } as never)).toThrow(
      RepositoryConfigError,
    );
    expect(() => createRepository({ ...fx.s3.config('x/'), region: undefined } as never)).toThrow(
      /snapshot\.oss\.region is required/,
    );
  });

  it('reports refused credentials as a typed error (s3rver checks the access key id)', async () => {
    const repo = createRepository(fx.s3.config('creds/', { accessKeyId: 'WRONG', secretAccessKey: 'WRONG' }));
    const err = await repo.open().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepositoryUnavailableError);
    expect(err).toMatchObject({ reason: 'credentials', code: 'unavailable' });
    expect((err as Error).message).toMatch(/refused the credentials.*InvalidAccessKeyId/);
    const put = await repo.putBlob(sha(Buffer.from('a')), Buffer.from('a')).catch((e: unknown) => e);
    expect(put).toMatchObject({ reason: 'credentials' });
    await repo.close();
  });

  it('gets credentials from a credential process, and reports one that fails', async () => {
    const good = createRepository(
      fx.s3.config('cp/', {
        accessKeyId: undefined,
        secretAccessKey: undefined,
        credentialProcess: `echo '{"Version":1,"AccessKeyId":"S3RVER","SecretAccessKey":"S3RVER"}'`,
      }),
    );
    await good.open();
    await good.putBlob(sha(Buffer.from('cp')), Buffer.from('cp'));
    expect(await good.hasBlob(sha(Buffer.from('cp')))).toBe(true);
    await good.close();
    const bad = createRepository(
      fx.s3.config('cp/', {
        accessKeyId: undefined,
        secretAccessKey: undefined,
        credentialProcess: 'echo nope >&2; exit 3',
      }),
    );
    await expect(bad.open()).rejects.toMatchObject({
      reason: 'credentials',
      message: expect.stringMatching(/credential process failed.*nope/),
    });
    await bad.close();
  });

  it('reports an unreachable endpoint and a missing bucket as typed errors', async () => {
    // A port nothing listens on: bind one, then close it.
    const port = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const repo = createRepository({
      ...fx.s3.config('x/'),
      endpoint: `http://127.0.0.1:${port}`,
      maxAttempts: 1,
    });
    const t0 = Date.now();
    const err = await repo.open().catch((e: unknown) => e);
    expect(err).toMatchObject({ reason: 'unreachable' });
    expect((err as Error).message).toMatch(
      new RegExp(`127\\.0\\.0\\.1:${port} is unreachable.*ECONNREFUSED`),
    );
    expect(Date.now() - t0).toBeLessThan(10_000);
    await repo.close();

    const nobucket = createRepository({ ...fx.s3.config('x/'), bucket: 'no-such-bucket' });
    await expect(nobucket.open()).rejects.toMatchObject({ reason: 'bucket' });
    await nobucket.close();
  });

  it('reports a posix repository that is not there', async () => {
    const dir = await fx.scratch('missing');
    const repo = createRepository({ backend: 'posix_fs', path: `${dir}/not-mounted`, create: false });
    await expect(repo.open()).rejects.toMatchObject({ reason: 'io', code: 'unavailable' });
    const file = createRepository({ backend: 'posix_fs', path: `${dir}` });
    await file.open();
    expect((await readdir(dir)).sort()).toEqual(['aliases', 'blobs', 'claims', 'locks', 'records', 'tmp']);
  });
});
