/**
 * A second node process for the concurrency and crash tests: it opens the repository described
 * by its JSON argument and stores synthetic captures.
 *   mode "race":  stores `count` captures, each claiming the alias `alias`, and prints one JSON line
 *                 per attempt ({id, ok, code}).
 *   mode "loop":  stores captures forever (every third with a name; every fifth deletes an older
 *                 one and collects garbage with no grace period), printing each committed id; the
 *                 test SIGKILLs it at random moments.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createRepository, SnapshotError, SnapshotStore, type RepositoryConfig } from '@agentenv/snapshot';
import { writeCapture } from './helpers.js';

interface Args {
  mode: 'race' | 'loop';
  repo: RepositoryConfig;
  work: string;
  count?: number;
  alias?: string;
  tag: string;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const repo = createRepository(args.repo);
await repo.open();
const store = new SnapshotStore({
  repository: repo,
  chunking: { avgBytes: 16 * 1024, minBytes: 4096, maxBytes: 64 * 1024 },
  lease: { ttlMs: 5_000, pollMs: 20 },
  gcGraceMs: 0,
});

async function once(i: number, alias?: string) {
  const dir = join(args.work, `${args.tag}-${process.pid}-${i}`);
  // Half shared content (dedup across writers), half new.
  await writeCapture(dir, {
    'pages.img': Buffer.concat([Buffer.alloc(64 * 1024, 7), randomBytes(48 * 1024)]),
    'checkpoint.img': randomBytes(5000 + (i % 7)),
  });
  try {
    return await store.storeCapture(dir, {
      labels: { writer: args.tag },
      ...(alias ? { aliases: [alias] } : {}),
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (args.mode === 'race') {
  for (let i = 0; i < (args.count ?? 1); i++) {
    try {
      const s = await once(i, args.alias);
      console.log(JSON.stringify({ id: s.snapshotId, ok: true }));
    } catch (e) {
      console.log(
        JSON.stringify({
          ok: false,
          code: e instanceof SnapshotError ? e.code : String(e),
          message: String(e),
        }),
      );
    }
  }
  await repo.close();
} else {
  const mine: string[] = [];
  for (let i = 0; ; i++) {
    const s = await once(i, i % 3 === 0 ? `${args.tag}-name-${i}` : undefined);
    mine.push(s.snapshotId);
    console.log(`committed ${s.snapshotId}`);
    if (i % 5 === 4 && mine.length > 2) {
      const victim = mine.splice(Math.floor(Math.random() * (mine.length - 1)), 1)[0]!;
      console.log(`deleting ${victim}`);
      await store.deleteSnapshot(victim, { collect: true });
      console.log(`deleted ${victim}`);
    }
  }
}
