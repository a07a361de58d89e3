import { randomBytes } from 'node:crypto';
import { constants, type ReadStream, type Stats } from 'node:fs';
import { chmod, lchown, lstat, mkdir, open, readdir, readlink, realpath, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { conflict, DomainError, invalid } from '@agentenv/common';
import { displayPath, volumeRelativePath } from './rules.js';

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
const UPLOAD_PREFIX = '.aenv-upload-';

const notFound = (p: string) => new DomainError('not_found', `path ${p} not found`);

/**
 * The files of one volume, every path confined to its directory: `..` is refused, and no
 * operation follows a symlink that a sandbox may have planted to reach out of the volume.
 */
export class VolumeFiles {
  constructor(
    private readonly root: string,
    private readonly volumeName: string,
    private readonly quotaBytes: number,
  ) {}

  async stat(p: string): Promise<VolumeEntryStat> {
    const at = await this.locate(p);
    const st = await lstat(at.host).catch(() => {
      throw notFound(at.display);
    });
    return entryStat(at.segments, st, at.host);
  }

  async list(p: string, depth: number): Promise<VolumeEntryStat[]> {
    if (!Number.isInteger(depth) || depth < 1) throw invalid('depth must be a positive integer');
    const top = await this.stat(p);
    if (top.type !== 'directory') throw invalid(`path ${top.path} is not a directory`);
    const out: VolumeEntryStat[] = [];
    const walk = async (segments: string[], level: number): Promise<void> => {
      const dir = path.join(this.root, ...segments);
      for (const d of await readdir(dir, { withFileTypes: true })) {
        if (out.length >= MAX_LISTED) return;
        if (d.name.startsWith(UPLOAD_PREFIX)) continue;
        const child = [...segments, d.name];
        const st = await lstat(path.join(dir, d.name)).catch(() => undefined);
        if (!st) continue;
        out.push(await entryStat(child, st, path.join(dir, d.name)));
        if (st.isDirectory() && level < depth) await walk(child, level + 1);
      }
    };
    await walk(volumeRelativePath(p), 1);
    return out;
  }

  async makeDir(p: string, opts: Ownership & { force?: boolean }): Promise<VolumeEntryStat> {
    const at = await this.locate(p, { parentsMayBeMissing: opts.force === true });
    if (at.segments.length === 0) throw conflict('the volume root already exists');
    const exists = await lstat(at.host).catch(() => undefined);
    if (exists) throw conflict(`path ${at.display} already exists`);
    if (opts.force) await this.makeParents(at.segments.slice(0, -1));
    await mkdir(at.host).catch((e: NodeJS.ErrnoException) => {
      throw e.code === 'ENOENT' ? notFound(path.posix.dirname(at.display)) : e;
    });
    await applyOwnership(at.host, opts, 0o755);
    return this.stat(at.display);
  }

  async updateMetadata(p: string, meta: Ownership): Promise<VolumeEntryStat> {
    const before = await this.stat(p);
    if (before.type === 'symlink') throw invalid(`path ${before.path} is a symlink; its metadata is fixed`);
    const host = path.join(this.root, ...volumeRelativePath(p));
    if (meta.uid !== undefined || meta.gid !== undefined)
      await lchown(host, meta.uid ?? before.uid, meta.gid ?? before.gid);
    if (meta.mode !== undefined) await chmod(host, meta.mode & 0o7777);
    return this.stat(p);
  }

  /** A readable stream of a regular file (a symlink is never followed). */
  async read(p: string): Promise<{ stream: ReadStream; size: number }> {
    const at = await this.locate(p);
    const fh = await open(at.host, constants.O_RDONLY | constants.O_NOFOLLOW).catch(
      (e: NodeJS.ErrnoException) => {
        throw e.code === 'ENOENT'
          ? notFound(at.display)
          : e.code === 'ELOOP'
            ? invalid(`path ${at.display} is a symlink`)
            : e;
      },
    );
    const st = await fh.stat();
    if (!st.isFile()) {
      await fh.close();
      throw invalid(`path ${at.display} is not a regular file`);
    }
    // The handle's own stream closes the handle; a stream over its raw fd would close it twice.
    return { stream: fh.createReadStream(), size: st.size };
  }

  /**
   * Writes a file from a stream: into a temporary file beside it, renamed over the target once
   * complete, so readers never see half a file and a refused upload leaves nothing behind.
   * Missing parents are created. The quota counts the volume's bytes after the write.
   */
  async write(
    p: string,
    body: Readable,
    opts: Ownership & { declaredBytes?: number },
  ): Promise<VolumeEntryStat> {
    const at = await this.locate(p, { parentsMayBeMissing: true });
    if (at.segments.length === 0) throw invalid('cannot write the volume root');
    const existing = await lstat(at.host).catch(() => undefined);
    if (existing?.isDirectory()) throw conflict(`path ${at.display} is a directory`);
    const parent = displayPath(at.segments.slice(0, -1));
    if (at.segments.length > 1) await this.makeParents(at.segments.slice(0, -1));
    const room = this.quotaBytes - ((await usedBytes(this.root)) - (existing?.isFile() ? existing.size : 0));
    if (opts.declaredBytes !== undefined && opts.declaredBytes > room) throw this.overQuota();
    const dir = (await this.locate(parent)).host;
    const tmp = path.join(dir, UPLOAD_PREFIX + randomBytes(8).toString('hex'));
    let written = 0;
    const meter = new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        written += chunk.length;
        done(written > room ? this.overQuota() : null, chunk);
      },
    });
    try {
      // 'wx' (O_EXCL) never opens an existing file or a symlink.
      const out = await open(tmp, 'wx', 0o644);
      await pipeline(body, meter, out.createWriteStream());
      await applyOwnership(tmp, opts, 0o644);
      await rename(tmp, at.host);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    return this.stat(at.display);
  }

  async remove(p: string): Promise<void> {
    const at = await this.locate(p);
    if (at.segments.length === 0) throw invalid('cannot remove the volume root');
    if (!(await lstat(at.host).catch(() => undefined))) throw notFound(at.display);
    await rm(at.host, { recursive: true, force: true });
  }

  private overQuota(): DomainError {
    const MiB = 1024 * 1024;
    const q = this.quotaBytes % MiB === 0 ? `${this.quotaBytes / MiB} MiB` : `${this.quotaBytes} bytes`;
    return new DomainError('too_large', `volume ${this.volumeName} would exceed its quota of ${q}`);
  }

  private async makeParents(segments: string[]): Promise<void> {
    for (let i = 1; i <= segments.length; i++) {
      const part = await this.locate(displayPath(segments.slice(0, i)));
      const st = await lstat(part.host).catch(() => undefined);
      if (st && !st.isDirectory()) throw conflict(`path ${part.display} is not a directory`);
      if (!st) {
        await mkdir(part.host).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'EEXIST') throw e;
        });
        await applyOwnership(part.host, {}, 0o755);
      }
    }
  }

  /**
   * The host path of `p`. Its parent must resolve (symlinks included) inside the volume; the
   * last segment is left unresolved, and callers never follow it.
   */
  private async locate(
    p: string,
    opts: { parentsMayBeMissing?: boolean } = {},
  ): Promise<{ segments: string[]; host: string; display: string }> {
    const segments = volumeRelativePath(p);
    const display = displayPath(segments);
    const host = path.join(this.root, ...segments);
    if (segments.length === 0) return { segments, host, display };
    const root = await realpath(this.root);
    // The deepest existing ancestor is what must stay inside; missing ones are created by callers.
    let probe = path.dirname(host);
    for (;;) {
      const real = await realpath(probe).catch((e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT' && opts.parentsMayBeMissing) return undefined;
        if (e.code === 'ENOENT' || e.code === 'ENOTDIR') throw notFound(path.posix.dirname(display));
        throw e;
      });
      if (real !== undefined) {
        if (real !== root && !real.startsWith(root + path.sep))
          throw invalid(`path ${display} leaves the volume through a symlink`);
        return { segments, host, display };
      }
      probe = path.dirname(probe);
    }
  }
}

async function applyOwnership(host: string, o: Ownership, defaultMode: number): Promise<void> {
  await lchown(host, o.uid ?? DEFAULT_OWNER.uid, o.gid ?? DEFAULT_OWNER.gid);
  await chmod(host, (o.mode ?? defaultMode) & 0o7777);
}

async function entryStat(segments: string[], st: Stats, host: string): Promise<VolumeEntryStat> {
  const type = st.isFile()
    ? 'file'
    : st.isDirectory()
      ? 'directory'
      : st.isSymbolicLink()
        ? 'symlink'
        : 'unknown';
  const e: VolumeEntryStat = {
    name: segments.at(-1) ?? '',
    type,
    path: displayPath(segments),
    size: st.size,
    mode: st.mode & 0o7777,
    uid: st.uid,
    gid: st.gid,
    atime: st.atime.toISOString(),
    mtime: st.mtime.toISOString(),
    ctime: st.ctime.toISOString(),
  };
  if (type === 'symlink') {
    e.target = await readlink(host);
  }
  return e;
}

/** Bytes the volume's files hold (apparent sizes; symlinks are not followed). */
export async function usedBytes(dir: string): Promise<number> {
  let total = 0;
  for (const d of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) total += await usedBytes(p);
    else if (d.isFile()) total += (await lstat(p).catch(() => undefined))?.size ?? 0;
  }
  return total;
}
