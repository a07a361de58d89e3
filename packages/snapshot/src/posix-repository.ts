import { randomBytes } from 'node:crypto';
import { copyFile, link, mkdir, open, readdir, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { RepositoryUnavailableError } from './errors.js';
import type { ObjectStat } from './repository.js';
import { ObjectRepository, type ObjectRepositoryOptions } from './repository-objects.js';

export interface PosixRepositoryOptions extends ObjectRepositoryOptions {
  /** The repository directory; may be on a shared filesystem (NFS, CephFS, ...) used by several nodes. */
  readonly path: string;
  /** Create the directory when missing (default true). false: a missing one (e.g. an unmounted share) is an error. */
  readonly create?: boolean;
  /** fsync files and directories (default true); only tests of throwaway repositories turn it off. */
  readonly fsync?: boolean;
}

/** Temporary files older than this were left by a writer that died. */
const TMP_MAX_AGE_MS = 60 * 60 * 1000;
const LAYOUT = ['blobs/sha256', 'records', 'aliases', 'locks', 'claims', 'tmp'];

const errno = (e: unknown) => (e as NodeJS.ErrnoException).code;

/**
 * The posix_fs backend: one file per object. Every write goes to tmp/ (same filesystem), is
 * fsynced, then renamed into place (replace) or hard-linked (exclusive create: link() fails with
 * EEXIST, atomically, also on NFS v3+); directories are fsynced before a record refers to what they
 * hold. Nothing but atomic rename/link/unlink on single files is needed from a shared filesystem.
 */
export class PosixRepository extends ObjectRepository {
  readonly backend = 'posix_fs' as const;
  readonly location: string;
  private readonly create: boolean;
  private readonly fsync: boolean;
  /** Directories with entries added since the last flush. */
  private dirty = new Set<string>();

  constructor(opts: PosixRepositoryOptions) {
    super(opts);
    this.location = resolve(opts.path);
    this.create = opts.create ?? true;
    this.fsync = opts.fsync ?? true;
  }

  private fail(op: string, e: unknown): never {
    if (e instanceof RepositoryUnavailableError) throw e;
    const code = errno(e) ?? 'error';
    throw new RepositoryUnavailableError(
      'io',
      `snapshot repository ${this.location}: ${op} failed (${code}: ${(e as Error).message})`,
      { cause: e },
    );
  }

  private file(key: string): string {
    return join(this.location, ...key.split('/'));
  }

  async open(): Promise<void> {
    try {
      const st = await stat(this.location).catch((e: unknown) => {
        if (errno(e) === 'ENOENT' && this.create) return null;
        throw e;
      });
      if (st && !st.isDirectory()) throw new Error('not a directory');
      for (const d of LAYOUT) await mkdir(join(this.location, d), { recursive: true });
      // Write access, and the chance to drop temporary files of writers that died.
      const probe = join(this.location, 'tmp', `probe-${process.pid}-${randomBytes(4).toString('hex')}`);
      await (await open(probe, 'wx')).close();
      await unlink(probe);
      await this.sweepTmp();
    } catch (e) {
      this.fail('open', e);
    }
  }

  async close(): Promise<void> {}

  private async sweepTmp(): Promise<void> {
    const dir = join(this.location, 'tmp');
    for (const name of await readdir(dir)) {
      const st = await stat(join(dir, name)).catch(() => null);
      if (st && Date.now() - st.mtimeMs > TMP_MAX_AGE_MS)
        await unlink(join(dir, name)).catch(() => undefined);
    }
  }

  private async syncDir(dir: string): Promise<void> {
    if (!this.fsync) return;
    const fh = await open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  }

  protected override async flush(): Promise<void> {
    const dirs = [...this.dirty];
    this.dirty = new Set();
    try {
      await Promise.all(dirs.map((d) => this.syncDir(d)));
    } catch (e) {
      for (const d of dirs) this.dirty.add(d);
      this.fail('fsync', e);
    }
  }

  protected async putObject(
    key: string,
    body: Buffer | { readonly path: string },
    opts: { exclusive: boolean },
  ): Promise<boolean> {
    const dest = this.file(key);
    const dir = dirname(dest);
    const tmp = join(this.location, 'tmp', `${process.pid}-${randomBytes(8).toString('hex')}`);
    try {
      if (Buffer.isBuffer(body)) {
        const fh = await open(tmp, 'wx', 0o644);
        try {
          await fh.writeFile(body);
          if (this.fsync) await fh.sync();
        } finally {
          await fh.close();
        }
      } else {
        await copyFile(body.path, tmp);
        if (this.fsync) {
          const fh = await open(tmp, 'r+');
          await fh.sync().finally(() => fh.close());
        }
      }
      const place = () => (opts.exclusive ? link(tmp, dest) : rename(tmp, dest));
      try {
        await place();
      } catch (e) {
        if (errno(e) === 'EEXIST' && opts.exclusive) return false;
        // Only a blob's fan-out directory is made on demand: a missing layout directory means the
        // repository is not there (e.g. an unmounted share), which must not be papered over.
        if (errno(e) !== 'ENOENT' || !key.startsWith('blobs/')) throw e;
        await mkdir(dir).then(
          () => this.dirty.add(dirname(dir)),
          (e2: unknown) => {
            if (errno(e2) !== 'EEXIST') throw e2; // another writer made it first
          },
        );
        await place();
      }
      if (key.startsWith('blobs/')) this.dirty.add(dir);
      else await this.syncDir(dir);
      return true;
    } catch (e) {
      if (errno(e) === 'EEXIST' && opts.exclusive) return false;
      return this.fail(`writing ${key}`, e);
    } finally {
      // After a rename it is gone already; after link() or a failure it must go.
      await unlink(tmp).catch(() => undefined);
    }
  }

  protected async getObject(key: string): Promise<{ data: Buffer; mtimeMs: number } | null> {
    try {
      const fh = await open(this.file(key), 'r');
      try {
        const st = await fh.stat();
        return { data: await fh.readFile(), mtimeMs: st.mtimeMs };
      } finally {
        await fh.close();
      }
    } catch (e) {
      if (errno(e) === 'ENOENT') return null;
      return this.fail(`reading ${key}`, e);
    }
  }

  protected async openObject(key: string): Promise<Readable | null> {
    try {
      const fh = await open(this.file(key), 'r');
      return fh.createReadStream();
    } catch (e) {
      if (errno(e) === 'ENOENT') return null;
      return this.fail(`reading ${key}`, e);
    }
  }

  protected async statObject(key: string): Promise<ObjectStat | null> {
    try {
      const st = await stat(this.file(key));
      return { key, bytes: st.size, mtimeMs: st.mtimeMs };
    } catch (e) {
      if (errno(e) === 'ENOENT') return null;
      return this.fail(`stat ${key}`, e);
    }
  }

  protected async *listObjects(prefix: string): AsyncIterable<ObjectStat> {
    const walk = async function* (this: PosixRepository, rel: string): AsyncIterable<ObjectStat> {
      let entries;
      try {
        entries = await readdir(this.file(rel), { withFileTypes: true });
      } catch (e) {
        if (errno(e) === 'ENOENT' && rel !== prefix) return; // removed while listing
        return this.fail(`listing ${rel}`, e);
      }
      for (const ent of entries) {
        const key = `${rel}${ent.name}`;
        if (ent.isDirectory()) yield* walk.call(this, `${key}/`);
        else if (ent.isFile()) {
          const st = await this.statObject(key);
          if (st) yield st;
        }
      }
    };
    yield* walk.call(this, prefix);
  }

  protected async deleteObject(key: string): Promise<void> {
    try {
      await unlink(this.file(key));
      if (!key.startsWith('blobs/')) await this.syncDir(dirname(this.file(key)));
    } catch (e) {
      if (errno(e) !== 'ENOENT') this.fail(`deleting ${key}`, e);
    }
  }
}
