import { EnvdError } from '../errors.js';
import { loadAddon } from '../native.js';

/** The masks of <sys/inotify.h> that directory watching uses. */
export const IN = {
  MODIFY: 0x2,
  ATTRIB: 0x4,
  MOVED_FROM: 0x40,
  MOVED_TO: 0x80,
  CREATE: 0x100,
  DELETE: 0x200,
  DELETE_SELF: 0x400,
  MOVE_SELF: 0x800,
  Q_OVERFLOW: 0x4000,
  IGNORED: 0x8000,
  ONLYDIR: 0x01000000,
  DONT_FOLLOW: 0x02000000,
  ISDIR: 0x40000000,
} as const;

export interface InotifyEvent {
  wd: number;
  mask: number;
  cookie: number;
  /** The entry's name within the watched directory; empty for an event about the directory. */
  name: string;
}

export interface InotifyListener {
  /** This listener's events of one read from the kernel, in order. */
  onEvents(events: InotifyEvent[]): void;
  /** Events were lost (the kernel's queue overflowed) or the instance failed: terminal. */
  onError(err: Error): void;
}

type Handle = object;
interface Addon {
  open(callback: (events: InotifyEvent[] | null, errno?: number) => void): Handle;
  add(handle: Handle, path: string, mask: number): number;
  remove(handle: Handle, wd: number): void;
  close(handle: Handle): void;
}

/**
 * One inotify instance for the whole process, shared by every watcher: the kernel allows few
 * instances per user (fs.inotify.max_user_instances, 128 by default) and many watches. The kernel
 * gives one watch descriptor per directory per instance, so watchers of the same directory share
 * it; it is dropped when its last listener goes, and the instance when its last watch goes.
 */
class Inotify {
  private handle: Handle | undefined;
  private readonly listeners = new Map<number, Set<InotifyListener>>();

  constructor(private readonly addon: Addon) {}

  /** Watches `dir` for `listener`; returns the watch descriptor. Throws as fs calls do (code). */
  add(dir: string, mask: number, listener: InotifyListener): number {
    this.handle ??= this.addon.open((events, errno) => this.deliver(events, errno));
    let wd: number;
    try {
      wd = this.addon.add(this.handle, dir, mask);
    } catch (err) {
      this.closeIfIdle();
      throw err;
    }
    let set = this.listeners.get(wd);
    if (!set) this.listeners.set(wd, (set = new Set()));
    set.add(listener);
    return wd;
  }

  remove(wd: number, listener: InotifyListener): void {
    const set = this.listeners.get(wd);
    if (!set?.delete(listener) || set.size > 0) return;
    this.listeners.delete(wd);
    if (this.handle) this.addon.remove(this.handle, wd);
    this.closeIfIdle();
  }

  private closeIfIdle(): void {
    if (this.listeners.size > 0 || !this.handle) return;
    this.addon.close(this.handle);
    this.handle = undefined;
  }

  private deliver(events: InotifyEvent[] | null, errno?: number): void {
    if (!events || events.some((e) => e.mask & IN.Q_OVERFLOW)) {
      const err = new EnvdError(
        'internal',
        events ? 'inotify event queue overflowed: events were lost' : `inotify read failed (errno ${errno})`,
      );
      for (const set of [...this.listeners.values()]) for (const l of [...set]) l.onError(err);
      return;
    }
    const byListener = new Map<InotifyListener, InotifyEvent[]>();
    for (const e of events) {
      for (const l of this.listeners.get(e.wd) ?? []) {
        const list = byListener.get(l);
        if (list) list.push(e);
        else byListener.set(l, [e]);
      }
      // The kernel dropped this watch (its directory is gone, or it was removed).
      if (e.mask & IN.IGNORED) this.listeners.delete(e.wd);
    }
    for (const [l, list] of byListener) l.onEvents(list);
    this.closeIfIdle();
  }
}

let shared: Inotify | undefined;

/** The process's inotify instance; throws when envd was built without its inotify addon. */
export function inotify(): Inotify {
  if (shared) return shared;
  const addon = loadAddon<Addon>('inotify');
  if (!addon)
    throw new EnvdError(
      'failed_precondition',
      'directory watching is unavailable: envd was built without its inotify addon',
    );
  return (shared = new Inotify(addon));
}
