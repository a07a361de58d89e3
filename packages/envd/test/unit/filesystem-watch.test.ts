import { chownSync, closeSync, existsSync, fchownSync, openSync, writeSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EventType, type FilesystemEvent } from '@agentenv/protocol';
import { eventually } from '@agentenv/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DirWatcher, WatcherRegistry, checkWatchable } from '../../src/filesystem/watch.js';

const namer = () => ({ user: (uid: number) => `u${uid}`, group: (gid: number) => `g${gid}` });

let dir: string;
let watcher: DirWatcher | undefined;
let events: FilesystemEvent[];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'envd-watch-'));
  events = [];
});
afterEach(async () => {
  watcher?.close();
  watcher = undefined;
  await rm(dir, { recursive: true, force: true });
});

async function startWatch(opts: { recursive?: boolean; includeEntry?: boolean } = {}): Promise<DirWatcher> {
  watcher = new DirWatcher(dir, {
    recursive: opts.recursive ?? false,
    includeEntry: opts.includeEntry ?? false,
    namer,
    onEvent: (e) => events.push(e),
    onError: (err) => {
      throw err;
    },
  });
  await watcher.start();
  return watcher;
}

/** Waits until an event of `type` for `name` (and matching `where`) arrived. */
function waitFor(
  type: EventType,
  name: string,
  where: (e: FilesystemEvent) => boolean = () => true,
): Promise<FilesystemEvent> {
  return eventually(
    () => {
      const e = events.find((x) => x.type === type && x.name === name && where(x));
      if (!e) throw new Error(`no ${EventType[type]} ${name}; got ${summary().join(', ')}`);
      return e;
    },
    { intervalMs: 10 },
  );
}

let markers = 0;

/**
 * Returns once every event caused so far has been reported: all watches share one inotify queue
 * and batches are processed in order, so a new file's CREATE comes after all of them.
 */
async function settled(): Promise<void> {
  const name = `.settled-${markers++}`;
  await writeFile(path.join(dir, name), '');
  await waitFor(EventType.CREATE, name);
}

const summary = () => events.map((e) => `${EventType[e.type]} ${e.name}`);

describe('DirWatcher', () => {
  it('reports create, write, chmod and remove of direct children', async () => {
    await startWatch({ includeEntry: true });
    const f = path.join(dir, 'f.txt');
    await writeFile(f, 'one');
    const created = await waitFor(EventType.CREATE, 'f.txt');
    expect(created.entry?.path).toBe(f);
    // Each change on its own: a change looked at together with the next one is classified by both.
    await settled();
    await writeFile(f, 'two, longer');
    await waitFor(EventType.WRITE, 'f.txt', (e) => e.entry?.size === 11n);
    await settled();
    await chmod(f, 0o600);
    await waitFor(EventType.CHMOD, 'f.txt', (e) => e.entry?.mode === 0o600);
    await rm(f);
    const removed = await waitFor(EventType.REMOVE, 'f.txt');
    expect(removed.entry).toBeUndefined();
  });

  it('reports a move within the directory as RENAME + CREATE', async () => {
    await writeFile(path.join(dir, 'old'), 'x');
    await startWatch();
    await rename(path.join(dir, 'old'), path.join(dir, 'new'));
    await waitFor(EventType.RENAME, 'old');
    await waitFor(EventType.CREATE, 'new');
  });

  it('reports attribute changes of existing subdirectories as CHMOD, not CREATE', async () => {
    await mkdir(path.join(dir, 'sub'));
    await startWatch();
    await chmod(path.join(dir, 'sub'), 0o700);
    await waitFor(EventType.CHMOD, 'sub');
    expect(summary()).not.toContain('CREATE sub');
  });

  it('does not descend without recursive', async () => {
    await mkdir(path.join(dir, 'sub'));
    await startWatch();
    expect(watcher!.watchedDirectories).toBe(1);
    await writeFile(path.join(dir, 'sub/inner'), 'x');
    await writeFile(path.join(dir, 'marker'), 'x');
    await waitFor(EventType.CREATE, 'marker');
    expect(summary().some((s) => s.includes('inner'))).toBe(false);
  });

  it('watches existing and new subdirectories when recursive, and drops removed ones', async () => {
    await mkdir(path.join(dir, 'old/deep'), { recursive: true });
    await startWatch({ recursive: true });
    expect(watcher!.watchedDirectories).toBe(3);
    await writeFile(path.join(dir, 'old/deep/f'), 'x');
    await waitFor(EventType.CREATE, 'old/deep/f');

    await mkdir(path.join(dir, 'new'));
    await waitFor(EventType.CREATE, 'new');
    await writeFile(path.join(dir, 'new/f'), 'x');
    await waitFor(EventType.WRITE, 'new/f');

    // Made in one go, before any watch on `a` existed: announced by the scan.
    await mkdir(path.join(dir, 'a/b/c'), { recursive: true });
    await waitFor(EventType.CREATE, 'a');
    await waitFor(EventType.CREATE, 'a/b');
    await waitFor(EventType.CREATE, 'a/b/c');
    await settled();
    expect(summary().filter((s) => s === 'CREATE a/b/c')).toHaveLength(1);

    await rm(path.join(dir, 'old'), { recursive: true });
    await waitFor(EventType.REMOVE, 'old');
    await waitFor(EventType.REMOVE, 'old/deep/f');
    await settled();
    expect(summary().some((s) => s.endsWith('old/old') || s.endsWith('deep/deep'))).toBe(false);
    expect(watcher!.watchedDirectories).toBe(5); // root, new, a, a/b, a/b/c
  });

  it('keeps a second watcher of the same directory when the first closes (one kernel watch, shared)', async () => {
    const other: FilesystemEvent[] = [];
    const second = new DirWatcher(dir, {
      recursive: false,
      includeEntry: false,
      namer,
      onEvent: (e) => other.push(e),
      onError: (err) => {
        throw err;
      },
    });
    await second.start();
    try {
      await startWatch();
      watcher!.close();
      await writeFile(path.join(dir, 'after'), 'x');
      await eventually(() => expect(other.map((e) => e.name)).toContain('after'), { intervalMs: 10 });
      expect(events).toEqual([]);
    } finally {
      second.close();
    }
  });

  it('reports the removal of the watched directory itself as "."', async () => {
    await startWatch();
    await rm(dir, { recursive: true });
    await waitFor(EventType.REMOVE, '.');
    expect(watcher!.watchedDirectories).toBe(0);
  });
});

/**
 * What E2B's envd (fsnotify, one event per inotify event) reports for each step, each step on
 * its own and settled before the next.
 */
describe('DirWatcher event sequences, as E2B envd reports them', () => {
  /** The events of one step (without the settle markers). */
  async function step(run: () => Promise<void> | void): Promise<string[]> {
    await settled();
    const from = events.length;
    await run();
    await settled();
    return events
      .slice(from)
      .map((e) => `${EventType[e.type]} ${e.name}`)
      .filter((e) => !e.includes('.settled-'));
  }
  /** envd's upload (E2B's and ours): the owner set before truncating or after creating, then the data. */
  const upload = (p: string, data: string) => {
    const existed = existsSync(p);
    if (existed) chownSync(p, process.getuid!(), process.getgid!());
    const fd = openSync(p, 'w', 0o666);
    if (!existed) fchownSync(fd, process.getuid!(), process.getgid!());
    writeSync(fd, data);
    closeSync(fd);
  };

  it('create, write, overwrite, chmod, rename, remove', async () => {
    await startWatch();
    const f = path.join(dir, 'f');
    expect(await step(() => upload(f, 'one'))).toEqual(['CREATE f', 'CHMOD f', 'WRITE f']);
    expect(await step(() => writeFile(path.join(dir, 'g'), 'x'))).toEqual(['CREATE g', 'WRITE g']);
    expect(await step(() => upload(f, 'two'))).toEqual(['CHMOD f', 'WRITE f']);
    expect(await step(() => chmod(f, 0o600))).toEqual(['CHMOD f']);
    expect(await step(() => rename(f, path.join(dir, 'h')))).toEqual(['RENAME f', 'CREATE h']);
    expect(await step(() => rm(path.join(dir, 'h')))).toEqual(['REMOVE h']);
  });

  it('a new file in a nested directory of a recursive watch: CREATE first, then its changes', async () => {
    await mkdir(path.join(dir, 'nested'));
    await startWatch({ recursive: true });
    expect(await step(() => upload(path.join(dir, 'nested/f'), 'content'))).toEqual([
      'CREATE nested/f',
      'CHMOD nested/f',
      'WRITE nested/f',
    ]);
    expect(await step(() => chmod(path.join(dir, 'nested'), 0o700))).toEqual(['CHMOD nested']);
  });
});

describe('checkWatchable', () => {
  it('wants an existing directory', async () => {
    await checkWatchable(dir, false);
    await writeFile(path.join(dir, 'file'), 'x');
    await expect(checkWatchable(path.join(dir, 'file'), false)).rejects.toMatchObject({
      kind: 'invalid_argument',
    });
    await expect(checkWatchable(path.join(dir, 'missing'), false)).rejects.toMatchObject({
      kind: 'not_found',
    });
  });
});

describe('WatcherRegistry', () => {
  it('buffers events until drained and forgets removed watchers', async () => {
    const registry = new WatcherRegistry();
    const id = await registry.create(dir, { recursive: false, includeEntry: false, namer });
    expect(id).toMatch(/^w/);
    await writeFile(path.join(dir, 'a'), 'x');
    const drained: FilesystemEvent[] = [];
    await eventually(
      () => {
        drained.push(...registry.drain(id));
        expect(drained.map((e) => e.name)).toContain('a');
      },
      { intervalMs: 10 },
    );
    expect(registry.drain(id)).toEqual([]);
    registry.remove(id);
    expect(() => registry.drain(id)).toThrow(/not found/);
    expect(() => registry.remove(id)).toThrow(/not found/);
    await expect(
      registry.create(path.join(dir, 'missing'), { recursive: false, includeEntry: false, namer }),
    ).rejects.toThrow();
    expect(registry.size).toBe(0);
  });
});
