import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ImageBuildError } from './build-error.js';

/** What a committed layer records about itself (layer.json beside its rootfs/). */
export interface LayerMeta {
  readonly id: string;
  readonly createdAt: string;
  readonly source: unknown;
}

export interface LayerStoreOptions {
  /**
   * Unmounts everything mounted at or below a directory, deepest first, and throws when something
   * stays mounted. Build directories are passed through it before they are removed, so a builder
   * that mounts inside its rootfs (a chroot's /proc, /sys, /dev) and was killed leaves nothing a
   * recursive removal would reach into. Required where any builder of the store's directory mounts
   * (the node's: its Debian root filesystem builder does); the image puller alone mounts nothing.
   */
  readonly unmountBelow?: (dir: string) => Promise<void>;
}

const TMP_PREFIX = '.tmp-';

/** Whether a process exists (a temp dir named after a live pid is still being written). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Read-only filesystem layers under one directory, one subdirectory per id, shared by every
 * sandbox on the node. A layer only appears under its id once it is complete: it is built in a
 * temporary sibling (same filesystem) and renamed, so a crash or a failed build leaves no layer.
 */
export class LayerStore {
  constructor(
    readonly root: string,
    private readonly opts: LayerStoreOptions = {},
  ) {}

  dir(id: string): string {
    return join(this.root, id);
  }

  rootfs(id: string): string {
    return join(this.root, id, 'rootfs');
  }

  async has(id: string): Promise<boolean> {
    return stat(join(this.dir(id), 'layer.json')).then(
      () => true,
      () => false,
    );
  }

  async meta(id: string): Promise<LayerMeta> {
    return JSON.parse(await readFile(join(this.dir(id), 'layer.json'), 'utf8')) as LayerMeta;
  }

  /**
   * Builds layer `id` unless it exists: `fill` populates the given empty rootfs directory.
   * Concurrent builders of the same id both succeed; the first rename wins.
   */
  async ensure(id: string, source: unknown, fill: (rootfs: string) => Promise<void>): Promise<string> {
    if (await this.has(id)) return this.rootfs(id);
    await mkdir(this.root, { recursive: true });
    await this.sweep();
    const tmp = join(this.root, `${TMP_PREFIX}${id}-${process.pid}-${randomBytes(4).toString('hex')}`);
    try {
      await mkdir(join(tmp, 'rootfs'), { recursive: true });
      await fill(join(tmp, 'rootfs'));
      const meta: LayerMeta = { id, createdAt: new Date().toISOString(), source };
      await writeFile(join(tmp, 'layer.json'), JSON.stringify(meta, null, 2));
      try {
        await rename(tmp, this.dir(id));
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || !(await this.has(id))) throw e;
      }
    } catch (e) {
      if (e instanceof ImageBuildError) throw e;
      throw new ImageBuildError(`building layer ${id} failed: ${(e as Error).message}`, undefined, {
        cause: e,
      });
    } finally {
      await this.removeBuildDir(tmp);
    }
    return this.rootfs(id);
  }

  /** Removes temporary build directories left by builders that no longer run. */
  async sweep(): Promise<void> {
    const names = await readdir(this.root).catch(() => [] as string[]);
    for (const name of names) {
      if (!name.startsWith(TMP_PREFIX)) continue;
      const pid = Number(/-(\d+)-[0-9a-f]+$/.exec(name)?.[1]);
      if (Number.isInteger(pid) && pid !== process.pid && !pidAlive(pid)) {
        await this.removeBuildDir(join(this.root, name));
      }
    }
  }

  /** A build directory, after whatever its builder mounted inside it (a chroot's /proc, …). */
  private async removeBuildDir(dir: string): Promise<void> {
    await this.opts.unmountBelow?.(dir);
    await rm(dir, { recursive: true, force: true });
  }
}
