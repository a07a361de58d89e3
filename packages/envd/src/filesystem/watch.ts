import { randomBytes } from 'node:crypto';
import { lstatSync, watch, type BigIntStats, type FSWatcher } from 'node:fs';
import { lstat, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { EventType, type FilesystemEvent, FilesystemEventSchema } from '@agentenv/protocol';
import { invalidArgument, notFound, toEnvdError } from '../errors.js';
import { entryInfoIfExists, type Namer } from './entry.js';
import { readDirSorted } from './list.js';

/**
 * Directory watching with Node's fs.watch (inotify underneath), one non-recursive watch per
 * directory: a recursive watch adds one for every subdirectory, including those created later,
 * and drops them when they go away. (Node 20's recursive mode is not used: it cannot say which
 * directories it watches or drop them.)
 *
 * fs.watch reports only 'rename' (something appeared or vanished; also attribute changes of
 * subdirectories) and 'change' (data or attributes), so events are classified by looking at the
 * path afterwards, against what we remember of it (bounded, KNOWN_LIMIT paths):
 * - 'rename', the path exists and is a file we did not know → CREATE; gone → REMOVE, or RENAME
 *   when it is a move (see detectMoves).
 * - 'change', or 'rename' of a file we already knew → one CHMOD or WRITE each (classifyChanges).
 * Events that arrive together (one inotify read) form a batch, processed in order, with repeated
 * appearances and disappearances of one name dropped. Entries found in a directory that appears during a recursive
 * watch are announced as CREATE, since they were made before any watch could see them. inotify
 * names events about a watched directory itself after that directory; they are recognised by the
 * name and dropped (attribute change) or taken as its removal (the directory is gone).
 * Because a path is looked at after the fact, a file created and deleted within one batch can go
 * unseen; E2B's envd (fsnotify) would report both.
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

interface Known {
  dev: bigint;
  ino: bigint;
  birthtimeNs: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  mode: bigint;
  uid: bigint;
  gid: bigint;
  /** Announced by a directory scan; the watcher's own CREATE for it is then a repeat. */
  announced: boolean;
}

interface RawEvent {
  dir: string;
  kind: 'rename' | 'change';
  name: string;
  /** What the event is as a change, judged when it arrived (changeAtArrival). */
  change: EventType;
}

interface Observed {
  type: EventType;
  full: string;
  st?: BigIntStats;
  /** An inotify IN_ATTRIB or IN_MODIFY (fs.watch's 'change'), typed by classifyChanges. */
  change?: boolean;
}

/** How many paths' last stat results are remembered for CHMOD and RENAME detection. */
const KNOWN_LIMIT = 10_000;

/** Which file this is: an inode, told apart from a reused inode number by its birth time. */
const fileKey = (st: { dev: bigint; ino: bigint; birthtimeNs: bigint }) =>
  `${st.dev}:${st.ino}:${st.birthtimeNs}`;
const isGone = (err: unknown) => ['ENOENT', 'ENOTDIR'].includes((err as NodeJS.ErrnoException).code ?? '');

async function lstatIfExists(p: string): Promise<BigIntStats | undefined> {
  try {
    return await lstat(p, { bigint: true });
  } catch (err) {
    if (isGone(err)) return undefined;
    throw err;
  }
}

/** Event types that describe an entry still at the path, and so may carry its EntryInfo. */
function carriesEntry(type: EventType): boolean {
  return type === EventType.CREATE || type === EventType.WRITE || type === EventType.CHMOD;
}

export class DirWatcher {
  private readonly dirs = new Map<string, { watcher: FSWatcher; ino?: bigint }>();
  private readonly known = new Map<string, Known>();
  /** Each path's state when its latest event arrived (bounded, KNOWN_LIMIT paths). */
  private readonly arrived = new Map<string, BigIntStats>();
  private pending: RawEvent[] = [];
  private scheduled = false;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    readonly root: string,
    private readonly opts: DirWatcherOptions,
  ) {}

  /** Watches the root (and, when recursive, every directory under it). Throws on failure. */
  async start(): Promise<void> {
    this.addDir(this.root, true);
    const started = this.scan(this.root, false, undefined);
    this.chain = started.catch(() => undefined);
    await started;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const { watcher } of this.dirs.values()) watcher.close();
    this.dirs.clear();
    this.known.clear();
    this.arrived.clear();
    this.pending = [];
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
  private addDir(dir: string, required = false): boolean {
    if (this.closed || this.dirs.has(dir)) return false;
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, { persistent: false }, (kind, name) => this.onRaw(dir, kind, name));
    } catch (err) {
      if (!required && isGone(err)) return false;
      throw err;
    }
    watcher.on('error', (err) => {
      this.unwatch(dir);
      if (!isGone(err)) this.fail(err);
    });
    const record: { watcher: FSWatcher; ino?: bigint } = { watcher };
    this.dirs.set(dir, record);
    lstat(dir, { bigint: true }).then(
      (st) => (record.ino = st.ino),
      () => undefined,
    );
    return true;
  }

  /**
   * Looks through `dir`: remembers its subdirectories (so their attribute changes, which inotify
   * flags like creations, are not taken for new ones) and, when recursive, watches them and what
   * is below. With `announce` (`dir` appeared while watching), every entry found is reported as
   * CREATE: it was made before any watch could see it.
   */
  private async scan(dir: string, announce: boolean, namer: Namer | undefined): Promise<void> {
    for (const d of await readDirSorted(dir)) {
      if (this.closed) return;
      const full = path.join(dir, d.name);
      const isDir = d.isDirectory();
      const descend = isDir && this.opts.recursive;
      // Watched already: another event got there first and scans it.
      if (descend && !this.addDir(full)) continue;
      if (announce || isDir) {
        const st = await lstatIfExists(full);
        if (!st) continue;
        const prev = this.known.get(full);
        if (!announce) {
          this.remember(full, st, false);
        } else if (!prev || fileKey(prev) !== fileKey(st)) {
          // (Not when the watch reported it already.)
          this.remember(full, st, true);
          await this.emit(EventType.CREATE, full, namer);
        }
      }
      if (descend) await this.scan(full, announce, namer);
    }
  }

  private onRaw(dir: string, kind: string, name: string | Buffer | null): void {
    if (this.closed || name === null) return;
    const change = this.changeAtArrival(path.join(dir, String(name)));
    this.pending.push({ dir, kind: kind === 'change' ? 'change' : 'rename', name: String(name), change });
    if (this.scheduled) return;
    this.scheduled = true;
    // Everything one inotify read delivered arrives before this runs: that is a batch.
    setImmediate(() => {
      this.scheduled = false;
      const batch = this.pending;
      this.pending = [];
      this.chain = this.chain.then(() => this.process(batch)).catch((err: unknown) => this.fail(err));
    });
  }

  private async dirStillThere(dir: string): Promise<boolean> {
    const st = await lstatIfExists(dir);
    const ino = this.dirs.get(dir)?.ino;
    return !!st && st.isDirectory() && (ino === undefined || st.ino === ino);
  }

  private async process(batch: RawEvent[]): Promise<void> {
    const observed: Observed[] = [];
    for (const raw of batch) {
      if (this.closed) return;
      // A watch dropped since (its directory moved or went away) would report wrong names.
      if (!this.dirs.has(raw.dir)) continue;
      const full = path.join(raw.dir, raw.name);
      const st = await lstatIfExists(full);
      const prev = this.known.get(full);
      if (!st && !prev && raw.name === path.basename(raw.dir)) {
        // Most likely about the watched directory itself: inotify names such events after it.
        if (await this.dirStillThere(raw.dir)) continue; // its own attributes changed
        if (raw.dir === this.root) observed.push({ type: EventType.REMOVE, full: this.root });
        else this.unwatch(raw.dir); // its parent's watch reports the removal
        continue;
      }
      // Attribute changes of a subdirectory come as 'rename' too (inotify flags them IN_ISDIR).
      const sameAsBefore = st && prev && !prev.announced && fileKey(prev) === fileKey(st);
      if (raw.kind === 'change' || sameAsBefore) {
        observed.push({ type: raw.change, full, st, change: true });
      } else {
        observed.push({ type: st ? EventType.CREATE : EventType.REMOVE, full, st });
      }
    }
    this.classifyChanges(observed);
    this.detectMoves(observed);

    const namer = this.opts.includeEntry ? this.opts.namer() : undefined;
    const seen = new Set<string>();
    for (const o of observed) {
      if (this.closed) return;
      // Each change is its own inotify event, reported as E2B's envd does; an appearance or a
      // disappearance seen twice is one looked at late.
      const key = `${o.type}\0${o.full}`;
      if (!o.change && seen.has(key)) continue;
      seen.add(key);
      await this.apply(o, namer);
    }
  }

  /**
   * Types the changes that arrived together: IN_ATTRIB is CHMOD, IN_MODIFY is WRITE (E2B's envd
   * reports one event per inotify event, so an upload of a new file is CREATE, CHMOD for its
   * owner, WRITE). Their states on arrival were the same, so they cannot tell; but the kernel
   * merges an event into an identical one queued right before it, so a run of changes to one
   * path alternates between the two, and the path's state says what the last one was. A change
   * on its own keeps the type judged on arrival.
   */
  private classifyChanges(observed: Observed[]): void {
    for (let i = observed.length - 1; i >= 0; i--) {
      const o = observed[i]!;
      if (!o.change || !o.st) continue;
      const inRun = (other: Observed | undefined) => other?.change === true && other.full === o.full;
      const next = observed[i + 1];
      if (inRun(next)) o.type = next!.type === EventType.CHMOD ? EventType.WRITE : EventType.CHMOD;
      else if (inRun(observed[i - 1])) o.type = this.lastChangeType(o.full, o.st);
    }
  }

  /**
   * A change as inotify names it, judged by the path's state when the event arrives against its
   * state at its previous event: a write moves the size or the mtime, anything else is an
   * attribute change. Without a previous state, a ctime past the mtime means attributes moved
   * after the last write. (A synchronous lstat: the state must be the one right after the event,
   * not after what an upload under way does next.)
   */
  private changeAtArrival(full: string): EventType {
    let st: BigIntStats | undefined;
    try {
      st = lstatSync(full, { bigint: true, throwIfNoEntry: false });
    } catch {
      st = undefined;
    }
    const prev = this.arrived.get(full);
    this.arrived.delete(full);
    if (!st) return EventType.WRITE;
    this.arrived.set(full, st);
    if (this.arrived.size > KNOWN_LIMIT) this.arrived.delete(this.arrived.keys().next().value!);
    // A state that did not move at all since the previous event (ctime moves with any change) was
    // read after this change had already landed: only the ctime rule can tell then.
    if (prev && fileKey(prev) === fileKey(st) && prev.ctimeNs !== st.ctimeNs)
      return prev.size === st.size && prev.mtimeNs === st.mtimeNs ? EventType.CHMOD : EventType.WRITE;
    return st.ctimeNs > st.mtimeNs ? EventType.CHMOD : EventType.WRITE;
  }

  /**
   * Turns a REMOVE into RENAME when the batch also shows the same file appearing under another
   * name, or, for a file we knew nothing about, when the batch holds exactly one unexplained
   * disappearance and one appearance (how a plain `mv` looks to inotify).
   */
  private detectMoves(observed: Observed[]): void {
    const creates = observed.filter((o) => o.type === EventType.CREATE);
    const byFile = new Map(creates.map((o) => [fileKey(o.st!), o]));
    const unmatchedRemoves: Observed[] = [];
    const matchedCreates = new Set<Observed>();
    for (const o of observed) {
      if (o.type !== EventType.REMOVE || o.full === this.root) continue;
      const before = this.known.get(o.full);
      const movedTo = before && byFile.get(fileKey(before));
      if (movedTo && movedTo.full !== o.full) {
        o.type = EventType.RENAME;
        matchedCreates.add(movedTo);
      } else {
        unmatchedRemoves.push(o);
      }
    }
    const unmatchedCreates = creates.filter((o) => !matchedCreates.has(o));
    if (unmatchedRemoves.length === 1 && unmatchedCreates.length === 1)
      unmatchedRemoves[0]!.type = EventType.RENAME;
  }

  /**
   * What the latest change to a path was: attributes (CHMOD) when its ctime passed its mtime (a
   * write moves both) or, for a path we know, when only mode, owner or ctime moved since.
   */
  private lastChangeType(full: string, st: BigIntStats): EventType {
    if (st.ctimeNs > st.mtimeNs) return EventType.CHMOD;
    const prev = this.known.get(full);
    if (
      prev &&
      fileKey(prev) === fileKey(st) &&
      prev.size === st.size &&
      prev.mtimeNs === st.mtimeNs &&
      (prev.mode !== st.mode || prev.uid !== st.uid || prev.gid !== st.gid || prev.ctimeNs !== st.ctimeNs)
    ) {
      return EventType.CHMOD;
    }
    return EventType.WRITE;
  }

  private async apply(o: Observed, namer: Namer | undefined): Promise<void> {
    if (o.type === EventType.REMOVE || o.type === EventType.RENAME) {
      this.forget(o.full);
      this.unwatchTree(o.full);
      await this.emit(o.type, o.full, namer);
      return;
    }
    const st = o.st!;
    if (o.type === EventType.CREATE) {
      const prev = this.known.get(o.full);
      if (prev?.announced && fileKey(prev) === fileKey(st)) {
        prev.announced = false;
        return;
      }
    }
    this.remember(o.full, st, false);
    // Watch a new directory before announcing it, so a client reacting to the event cannot
    // outrun the watch; then announce what was made inside it before the watch existed.
    const newDir =
      o.type === EventType.CREATE && this.opts.recursive && st.isDirectory() && this.addDir(o.full);
    await this.emit(o.type, o.full, namer);
    if (newDir) await this.scan(o.full, true, namer);
  }

  private async emit(type: EventType, full: string, namer: Namer | undefined): Promise<void> {
    const entry =
      namer && carriesEntry(type) ? await entryInfoIfExists(full, namer).catch(() => undefined) : undefined;
    if (this.closed) return;
    const name = path.relative(this.root, full) || '.';
    this.opts.onEvent(create(FilesystemEventSchema, { name, type, entry }));
  }

  private remember(full: string, st: BigIntStats, announced: boolean): void {
    this.known.delete(full);
    this.known.set(full, {
      dev: st.dev,
      ino: st.ino,
      birthtimeNs: st.birthtimeNs,
      size: st.size,
      mtimeNs: st.mtimeNs,
      ctimeNs: st.ctimeNs,
      mode: st.mode,
      uid: st.uid,
      gid: st.gid,
      announced,
    });
    if (this.known.size > KNOWN_LIMIT) this.known.delete(this.known.keys().next().value!);
  }

  private forget(full: string): void {
    this.known.delete(full);
    if (!this.dirs.has(full)) return;
    const prefix = full + path.sep;
    for (const p of this.known.keys()) if (p.startsWith(prefix)) this.known.delete(p);
  }

  private unwatch(dir: string): void {
    this.dirs.get(dir)?.watcher.close();
    this.dirs.delete(dir);
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
