import { randomBytes } from 'node:crypto';
import { lstat, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { EventType, type FilesystemEvent, FilesystemEventSchema } from '@agentenv/protocol';
import { invalidArgument, notFound, toEnvdError } from '../errors.js';
import { entryInfoIfExists, type Namer } from './entry.js';
import { IN, inotify, type InotifyEvent, type InotifyListener } from './inotify.js';
import { readDirSorted } from './list.js';

/**
 * Directory watching on inotify, with each kernel event reported as its own type, as E2B's envd
 * (fsnotify) does: IN_CREATE and IN_MOVED_TO are CREATE, IN_MODIFY is WRITE, IN_ATTRIB is CHMOD,
 * IN_DELETE is REMOVE, IN_MOVED_FROM is RENAME. So an upload of a new file is CREATE, CHMOD (its
 * owner), WRITE. One watch per directory: a recursive watch adds one for every subdirectory,
 * including those created or moved in later, and drops them when they go. Entries found in a
 * directory that appears during a recursive watch are announced as CREATE, since they were made
 * before any watch could see them. Events about a watched directory itself are dropped (its
 * parent's watch reports them), except the removal or move of the root, which is reported as ".".
 */

export interface DirWatcherOptions {
  recursive: boolean;
  includeEntry: boolean;
  /** Owner/group names for entries; called once per batch when includeEntry is set. */
  namer(): Namer;
  onEvent(event: FilesystemEvent): void;
  /** A terminal failure; the watcher is closed when this is called. */
  onError(err: unknown): void;
}

const WATCH_MASK =
  IN.MODIFY |
  IN.ATTRIB |
  IN.MOVED_FROM |
  IN.MOVED_TO |
  IN.CREATE |
  IN.DELETE |
  IN.DELETE_SELF |
  IN.MOVE_SELF |
  IN.ONLYDIR;

/** How many announced entries are remembered to drop the watch's own CREATE for them. */
const ANNOUNCED_LIMIT = 10_000;

const isGone = (err: unknown) => ['ENOENT', 'ENOTDIR'].includes((err as NodeJS.ErrnoException).code ?? '');

async function inoIfExists(p: string): Promise<bigint | undefined> {
  try {
    return (await lstat(p, { bigint: true })).ino;
  } catch (err) {
    if (isGone(err)) return undefined;
    throw err;
  }
}

/** The event type of a kernel event about an entry, or undefined for one not reported. */
function typeOf(mask: number): EventType | undefined {
  if (mask & (IN.CREATE | IN.MOVED_TO)) return EventType.CREATE;
  if (mask & IN.MODIFY) return EventType.WRITE;
  if (mask & IN.ATTRIB) return EventType.CHMOD;
  if (mask & IN.DELETE) return EventType.REMOVE;
  if (mask & IN.MOVED_FROM) return EventType.RENAME;
  return undefined;
}

/** Event types that describe an entry still at the path, and so may carry its EntryInfo. */
function carriesEntry(type: EventType): boolean {
  return type === EventType.CREATE || type === EventType.WRITE || type === EventType.CHMOD;
}

export class DirWatcher {
  /** Watched directories by path, and their watch descriptors. */
  private readonly dirs = new Map<string, number>();
  private readonly byWd = new Map<number, string>();
  /** Entries announced by a scan (path → inode): the watch may report the same creation. */
  private readonly announced = new Map<string, bigint>();
  private readonly listener: InotifyListener = {
    onEvents: (events) => {
      this.chain = this.chain.then(() => this.process(events)).catch((err: unknown) => this.fail(err));
    },
    onError: (err) => this.fail(err),
  };
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    readonly root: string,
    private readonly opts: DirWatcherOptions,
  ) {}

  /** Watches the root (and, when recursive, every directory under it). Throws on failure. */
  async start(): Promise<void> {
    this.addDir(this.root, true);
    if (!this.opts.recursive) return;
    const started = this.scan(this.root, undefined);
    this.chain = started.catch(() => undefined);
    await started;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const dir of [...this.dirs.keys()]) this.unwatch(dir);
    this.announced.clear();
  }

  get watchedDirectories(): number {
    return this.dirs.size;
  }

  private fail(err: unknown): void {
    if (this.closed) return;
    this.close();
    this.opts.onError(err);
  }

  /** Starts watching one directory; false when it is gone (or already watched). */
  private addDir(dir: string, root = false): boolean {
    if (this.closed || this.dirs.has(dir)) return false;
    let wd: number;
    try {
      // Below the root, a name that became a symlink since is not followed out of the tree.
      wd = inotify().add(dir, root ? WATCH_MASK : WATCH_MASK | IN.DONT_FOLLOW, this.listener);
    } catch (err) {
      if (!root && isGone(err)) return false;
      throw err;
    }
    this.dirs.set(dir, wd);
    this.byWd.set(wd, dir);
    return true;
  }

  /**
   * Watches the subdirectories of `dir` (recursive watches). With `announce` (`dir` appeared while
   * watching), every entry found is reported as CREATE: it was made before any watch could see it.
   */
  private async scan(dir: string, namer: Namer | undefined, announce = false): Promise<void> {
    for (const d of await readDirSorted(dir)) {
      if (this.closed) return;
      const full = path.join(dir, d.name);
      const descend = d.isDirectory();
      // Watched already: another event got there first and scans it.
      if (descend && !this.addDir(full)) continue;
      if (announce) {
        const ino = await inoIfExists(full);
        if (ino === undefined) continue;
        this.announced.set(full, ino);
        if (this.announced.size > ANNOUNCED_LIMIT) this.announced.delete(this.announced.keys().next().value!);
        await this.emit(EventType.CREATE, full, namer);
      }
      if (descend) await this.scan(full, namer, announce);
    }
  }

  private async process(events: InotifyEvent[]): Promise<void> {
    const namer = this.opts.includeEntry ? this.opts.namer() : undefined;
    for (const e of events) {
      if (this.closed) return;
      const dir = this.byWd.get(e.wd);
      if (dir === undefined) continue; // a watch dropped since
      if (e.mask & IN.IGNORED) {
        this.dirs.delete(dir);
        this.byWd.delete(e.wd);
        continue;
      }
      if (!e.name) {
        if (dir === this.root && e.mask & (IN.DELETE_SELF | IN.MOVE_SELF)) {
          const type = e.mask & IN.DELETE_SELF ? EventType.REMOVE : EventType.RENAME;
          for (const d of [...this.dirs.keys()]) this.unwatch(d);
          await this.emit(type, this.root, namer);
        }
        continue;
      }
      const type = typeOf(e.mask);
      if (type !== undefined)
        await this.apply(type, path.join(dir, e.name), (e.mask & IN.ISDIR) !== 0, namer);
    }
  }

  private async apply(
    type: EventType,
    full: string,
    isDir: boolean,
    namer: Namer | undefined,
  ): Promise<void> {
    if (type === EventType.REMOVE || type === EventType.RENAME) {
      this.announced.delete(full);
      if (isDir) this.unwatchTree(full);
      await this.emit(type, full, namer);
      return;
    }
    if (type !== EventType.CREATE) {
      await this.emit(type, full, namer);
      return;
    }
    const announcedIno = this.announced.get(full);
    if (announcedIno !== undefined) {
      this.announced.delete(full);
      if ((await inoIfExists(full)) === announcedIno) return;
    }
    // Watch a new directory before announcing it, so a client reacting to the event cannot
    // outrun the watch; then announce what was made inside it before the watch existed.
    const newDir = isDir && this.opts.recursive && this.addDir(full);
    await this.emit(type, full, namer);
    if (newDir) await this.scan(full, namer, true);
  }

  private async emit(type: EventType, full: string, namer: Namer | undefined): Promise<void> {
    const entry =
      namer && carriesEntry(type) ? await entryInfoIfExists(full, namer).catch(() => undefined) : undefined;
    if (this.closed) return;
    const name = path.relative(this.root, full) || '.';
    this.opts.onEvent(create(FilesystemEventSchema, { name, type, entry }));
  }

  private unwatch(dir: string): void {
    const wd = this.dirs.get(dir);
    if (wd === undefined) return;
    this.dirs.delete(dir);
    this.byWd.delete(wd);
    inotify().remove(wd, this.listener);
  }

  private unwatchTree(dir: string): void {
    this.unwatch(dir);
    const prefix = dir + path.sep;
    for (const d of [...this.dirs.keys()]) if (d.startsWith(prefix)) this.unwatch(d);
  }
}

/** statfs magic numbers of network filesystems: NFS, CIFS, SMB, SMB2, FUSE (as E2B's envd). */
const NETWORK_FILESYSTEMS = new Set([0x6969, 0xff534d42, 0x517b, 0xfe534d42, 0x65735546]);

/** WatchDir's preconditions: an existing directory, not on a network mount unless allowed. */
export async function checkWatchable(dir: string, allowNetworkMounts: boolean): Promise<void> {
  let isDir: boolean;
  try {
    isDir = (await stat(dir)).isDirectory();
  } catch (err) {
    if (isGone(err)) throw notFound(`path ${dir} not found`);
    throw toEnvdError(err, dir);
  }
  if (!isDir) throw invalidArgument(`path ${dir} not a directory`);
  if (!allowNetworkMounts && NETWORK_FILESYSTEMS.has((await statfs(dir)).type)) {
    throw invalidArgument(`cannot watch path on network filesystem: ${dir}`);
  }
}

/** How many undrained events a polled watcher keeps; older ones are dropped. */
export const POLLED_EVENTS_LIMIT = 10_000;

interface Polled {
  watcher: DirWatcher;
  events: FilesystemEvent[];
  error?: unknown;
}

/**
 * The watchers of CreateWatcher / GetWatcherEvents / RemoveWatcher (the polling form the Python
 * sync SDK uses): events are buffered, bounded, until drained. A watcher that failed reports its
 * error on every drain until removed.
 */
export class WatcherRegistry {
  private readonly polled = new Map<string, Polled>();

  async create(
    dir: string,
    opts: Pick<DirWatcherOptions, 'recursive' | 'includeEntry' | 'namer'>,
  ): Promise<string> {
    const polled: Polled = {
      events: [],
      watcher: new DirWatcher(dir, {
        ...opts,
        onEvent: (e) => {
          polled.events.push(e);
          if (polled.events.length > POLLED_EVENTS_LIMIT) polled.events.shift();
        },
        onError: (err) => (polled.error = err),
      }),
    };
    try {
      await polled.watcher.start();
    } catch (err) {
      polled.watcher.close();
      throw err;
    }
    const id = 'w' + randomBytes(12).toString('base64url');
    this.polled.set(id, polled);
    return id;
  }

  private get(id: string): Polled {
    const polled = this.polled.get(id);
    if (!polled) throw notFound(`watcher with id ${id} not found`);
    return polled;
  }

  drain(id: string): FilesystemEvent[] {
    const polled = this.get(id);
    if (polled.error !== undefined) throw polled.error;
    const events = polled.events;
    polled.events = [];
    return events;
  }

  remove(id: string): void {
    this.get(id).watcher.close();
    this.polled.delete(id);
  }

  get size(): number {
    return this.polled.size;
  }
}
