import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { conflict, DomainError, invalid } from '@agentenv/common';
import { displayPath, volumeRelativePath } from './rules.js';
import { Volfs, VolfsError, type RawEntry } from './volfs.js';

/** E2B's VolumeEntryStat. */
export interface VolumeEntryStat {
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'unknown';
  path: string;
  size: number;
  mode: number;
  uid: number;
  gid: number;
  atime: string;
  mtime: string;
  ctime: string;
  target?: string;
}

export interface Ownership {
  uid?: number;
  gid?: number;
  mode?: number;
}

/** Owner of what the content API creates: the sandboxes' default user, so agents can write it. */
export const DEFAULT_OWNER = { uid: 1000, gid: 1000 };
/** A listing never returns more entries than this, whatever the depth. */
const MAX_LISTED = 10_000;
/** Uploads in progress; aenv-volfs leaves them out of listings. */
const UPLOAD_PREFIX = '.aenv-upload-';

/**
 * The files of one volume, every path confined to its directory while sandboxes change it
 * concurrently: `..` is refused here, and each operation runs in aenv-volfs (volfs.ts), which
 * resolves paths beneath the volume root without following any symlink and acts on what it
 * resolved, so a directory swapped for a symlink mid-operation cannot redirect it.
 */
export class VolumeFiles {
  private readonly fs: Volfs;

  constructor(
    root: string,
    private readonly volumeName: string,
    private readonly quotaBytes: number,
    helper?: string,
  ) {
    this.fs = new Volfs(root, helper);
  }

  async stat(p: string): Promise<VolumeEntryStat> {
    const segments = volumeRelativePath(p);
    return entryStat(await this.fs.run<RawEntry>('stat', segments).catch(this.refusal(segments)));
  }

  async list(p: string, depth: number): Promise<VolumeEntryStat[]> {
    if (!Number.isInteger(depth) || depth < 1) throw invalid('depth must be a positive integer');
    const top = await this.stat(p);
    if (top.type !== 'directory') throw invalid(`path ${top.path} is not a directory`);
    const segments = volumeRelativePath(p);
    const raw = await this.fs
      .run<RawEntry[]>('list', segments, [depth, MAX_LISTED])
      .catch(this.refusal(segments));
    return raw.map(entryStat);
  }

  async makeDir(p: string, opts: Ownership & { force?: boolean }): Promise<VolumeEntryStat> {
    const segments = volumeRelativePath(p);
    if (segments.length === 0) throw conflict('the volume root already exists');
    const o = owner(opts, 0o755);
    const args = [o.uid, o.gid, o.mode, opts.force ? 1 : 0];
    const made = await this.fs
      .run<RawEntry>('mkdir', segments, args)
      .catch(this.refusal(segments, opts.force));
    return entryStat(made);
  }

  async updateMetadata(p: string, meta: Ownership): Promise<VolumeEntryStat> {
    const segments = volumeRelativePath(p);
    if ((await this.stat(p)).type === 'symlink')
      throw invalid(`path ${displayPath(segments)} is a symlink; its metadata is fixed`);
    const args = [meta.uid ?? -1, meta.gid ?? -1, meta.mode ?? -1];
    return entryStat(await this.fs.run<RawEntry>('chmeta', segments, args).catch(this.refusal(segments)));
  }

  /** A readable stream of a regular file (a symlink is never followed). */
  async read(p: string): Promise<{ stream: Readable; size: number }> {
    const segments = volumeRelativePath(p);
    return this.fs.read(segments).catch(this.refusal(segments));
  }

  /**
   * Writes a file from a stream: into a temporary file beside it, renamed over the target once
   * complete, so readers never see half a file and a refused upload leaves nothing behind.
   * Missing parents are created. The quota counts the volume's bytes after the write; the
   * volume's own filesystem (store.ts) bounds what sandboxes write besides.
   */
  async write(
    p: string,
    body: Readable,
    opts: Ownership & { declaredBytes?: number },
  ): Promise<VolumeEntryStat> {
    const segments = volumeRelativePath(p);
    if (segments.length === 0) throw invalid('cannot write the volume root');
    const existing = await this.stat(p).catch(() => undefined);
    if (existing?.type === 'directory') throw conflict(`path ${existing.path} is a directory`);
    const { used } = await this.fs.run<{ used: number }>('usage', []);
    const room = this.quotaBytes - (used - (existing?.type === 'file' ? existing.size : 0));
    if (opts.declaredBytes !== undefined && opts.declaredBytes > room) throw this.overQuota();
    let written = 0;
    const meter = new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        written += chunk.length;
        done(written > room ? this.overQuota() : null, chunk);
      },
    });
    const tmp = UPLOAD_PREFIX + randomBytes(8).toString('hex');
    const onRefusal = this.refusal(segments, true);
    try {
      await this.fs.write(segments, tmp, owner(opts, 0o644), body, meter).catch(onRefusal);
      return entryStat(await this.fs.run<RawEntry>('commit', segments, [tmp]).catch(onRefusal));
    } catch (err) {
      await this.fs.run('remove', [...segments.slice(0, -1), tmp]).catch(() => undefined);
      throw err;
    }
  }

  async remove(p: string): Promise<void> {
    const segments = volumeRelativePath(p);
    if (segments.length === 0) throw invalid('cannot remove the volume root');
    await this.fs.run('remove', segments).catch(this.refusal(segments));
  }

  private overQuota(): DomainError {
    const MiB = 1024 * 1024;
    const q = this.quotaBytes % MiB === 0 ? `${this.quotaBytes / MiB} MiB` : `${this.quotaBytes} bytes`;
    return new DomainError('too_large', `volume ${this.volumeName} would exceed its quota of ${q}`);
  }

  /**
   * Maps what aenv-volfs refused for `segments` to the API's errors; other errors pass.
   * `creating`: the operation makes missing parents, so a parent that is a file is a conflict.
   */
  private refusal(segments: string[], creating = false): (err: unknown) => never {
    return (err) => {
      if (!(err instanceof VolfsError)) throw err;
      const full = displayPath(segments);
      if (err.code === 'ENOSPC' || err.code === 'EDQUOT') throw this.overQuota();
      if (err.code === 'ENOTDIR' && creating) throw conflict(`a parent of path ${full} is not a directory`);
      const shown = err.at === 'parent' ? displayPath(segments.slice(0, -1)) : full;
      throw refusalError(err.code, shown, full) ?? err;
    };
  }
}

function refusalError(code: string, shown: string, full: string): DomainError | undefined {
  switch (code) {
    case 'ENOENT':
    case 'ENOTDIR':
      return new DomainError('not_found', `path ${shown} not found`);
    case 'ELOOP':
      return invalid(`path ${full} is or leads through a symlink, which the volume API never follows`);
    case 'EXDEV':
      return invalid(`path ${full} leaves the volume`);
    case 'NOTREG':
      return invalid(`path ${full} is not a regular file`);
    case 'EEXIST':
      return conflict(`path ${full} already exists`);
    case 'EISDIR':
      return conflict(`path ${full} is a directory`);
    case 'ENOTEMPTY':
      return conflict(`path ${full} kept changing while it was removed`);
    default:
      return undefined;
  }
}

function owner(o: Ownership, defaultMode: number): { uid: number; gid: number; mode: number } {
  return {
    uid: o.uid ?? DEFAULT_OWNER.uid,
    gid: o.gid ?? DEFAULT_OWNER.gid,
    mode: (o.mode ?? defaultMode) & 0o7777,
  };
}

function entryStat(raw: RawEntry): VolumeEntryStat {
  const e: VolumeEntryStat = {
    name: path.posix.basename(raw.path),
    type: raw.type,
    path: raw.path,
    size: raw.size,
    mode: raw.mode,
    uid: raw.uid,
    gid: raw.gid,
    atime: new Date(raw.atimeMs).toISOString(),
    mtime: new Date(raw.mtimeMs).toISOString(),
    ctime: new Date(raw.ctimeMs).toISOString(),
  };
  if (raw.target !== undefined) e.target = raw.target;
  return e;
}
