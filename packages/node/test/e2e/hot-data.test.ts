/**
 * One copy of hot data on a node: a capture taken here enters the runtime cache by a rename, so
 * the cache entry is the very files the checkpoint wrote (same inodes, one link each), and every
 * restore reads that entry in place: no second copy of its bytes appears on the node's disk. The
 * repository is S3 behind a relay the test stalls, so the capture can be looked at before it is
 * stored (and no posix_fs chunk files sit on the same disk).
 */
import { Sandbox } from 'e2b';
import { existsSync, readdirSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import {
  api,
  localCaptures,
  RUNTIME_PATH,
  startServer,
  TEST_HOME,
  useS3BehindRelay,
} from '@agentenv/test-support/server';

/** Helper 4's port range: the node reaches S3 only through this relay. */
const RELAY_PORT = 19401;
const CACHE = path.join(TEST_HOME, 'snapshot-cache');
const CAPTURE_META = 'capture.json';

function completeCapture(sandboxId: string): string | undefined {
  const d = path.join(TEST_HOME, 'captures', sandboxId);
  if (!existsSync(d)) return undefined;
  return readdirSync(d)
    .filter((n) => !n.includes('.partial-'))
    .map((n) => path.join(d, n))
    .find((c) => existsSync(path.join(c, CAPTURE_META)));
}

type FileIds = Record<string, { ino: number; nlink: number; size: number }>;

/** Inode, link count and size of each file the runtime wrote into a capture directory. */
async function captureFiles(capture: string): Promise<FileIds> {
  const out: FileIds = {};
  for (const name of (await readdir(capture)).sort()) {
    if (name === CAPTURE_META) continue;
    const st = await stat(path.join(capture, name));
    out[name] = { ino: st.ino, nlink: st.nlink, size: st.size };
  }
  return out;
}

/** Every distinct file (dev:ino) of exactly `size` bytes under the node's home and runtime dir. */
async function filesOfSize(size: number): Promise<string[]> {
  const found = new Set<string>();
  for (const root of [TEST_HOME, RUNTIME_PATH]) {
    if (!existsSync(root)) continue;
    for (const ent of await readdir(root, { withFileTypes: true, recursive: true })) {
      if (!ent.isFile()) continue;
      const st = await stat(path.join(ent.parentPath, ent.name)).catch(() => null);
      if (st?.size === size) found.add(`${st.dev}:${st.ino}`);
    }
  }
  return [...found].sort();
}

const largest = (f: FileIds) => Object.values(f).sort((a, b) => b.size - a.size)[0]!;

describe('one copy of a capture taken on this node', () => {
  const ctx = useS3BehindRelay({ relayPort: RELAY_PORT, prefix: 'hot-data-test' });
  let src: Sandbox | undefined;

  beforeAll(async () => {
    ctx.server = await startServer(ctx.env());
    src = await Sandbox.create({ timeoutMs: 600_000 });
    await src.files.write('/tmp/hot', 'one copy');
  });

  it('a snapshot is kept as the files its checkpoint wrote, and restores read them in place', async () => {
    // S3 holds nothing of it while the node answers and starts sandboxes from it.
    ctx.relay.stall();
    const taken = await api('POST', `/sandboxes/${src!.sandboxId}/snapshots`, {});
    expect(taken.status).toBe(201);
    expect(taken.json.stored).toBe(false);
    const snapshotId = String(taken.json.snapshotID);

    const entry = path.join(CACHE, snapshotId);
    const written = await captureFiles(entry);
    expect(Object.values(written).map((f) => f.nlink)).toEqual(Object.values(written).map(() => 1));
    expect(localCaptures(src!.sandboxId)).toEqual([]);

    const memory = largest(written);
    const copies = await filesOfSize(memory.size);
    const kids = await Promise.all([1, 2].map(() => Sandbox.create(snapshotId)));
    for (const k of kids) expect(await k.files.read('/tmp/hot')).toBe('one copy');
    // Two sandboxes restored from the entry, and still the same files and no copy of them.
    expect(await filesOfSize(memory.size)).toEqual(copies);

    // Storing it reads the same files and leaves them where they are.
    ctx.relay.flow();
    await eventually(async () =>
      expect((await api('GET', `/snapshots/${snapshotId}`)).json.stored).toBe(true),
    );
    expect(await captureFiles(entry)).toEqual(written);
    await Promise.all(kids.map((k) => k.kill()));
  });

  it('a pause is cached as the files its checkpoint wrote once S3 holds it, and resumes from them', async () => {
    ctx.relay.stall();
    expect((await api('POST', `/sandboxes/${src!.sandboxId}/pause`)).status).toBe(204);
    // The answer comes once the sandbox is suspended; its checkpoint follows.
    let capture: string | undefined;
    await eventually(() => expect((capture = completeCapture(src!.sandboxId))).toBeDefined());
    const written = await captureFiles(capture!);
    await eventually(() => expect(ctx.relay.held).toBeGreaterThan(0));
    ctx.relay.flow();
    await eventually(() => expect(localCaptures(src!.sandboxId)).toEqual([]), { timeoutMs: 60_000 });

    const cached = await Promise.all(
      readdirSync(CACHE).map(async (id) => ({ id, files: await captureFiles(path.join(CACHE, id)) })),
    );
    const entries = cached.filter((c) => largest(c.files).ino === largest(written).ino);
    expect(entries.map((e) => e.files)).toEqual([written]);

    const resumed = await Sandbox.connect(src!.sandboxId);
    expect(await resumed.files.read('/tmp/hot')).toBe('one copy');
  });
});
