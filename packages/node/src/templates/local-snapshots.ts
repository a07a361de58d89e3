import { mkdir, readFile, readdir, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { conflict, invalid } from '../errors.js';
import { newSandboxId } from '../orchestrator/ids.js';
import type { SnapshotCatalog, SnapshotInfo } from '../orchestrator/seams.js';
import { readCapture } from '../runtime/capture.js';
import type { Capture } from '../runtime/driver.js';

const NAME = /^[a-zA-Z0-9][a-zA-Z0-9._:/-]{0,127}$/;

interface Stored {
  info: SnapshotInfo;
  envdToken?: string;
}

/**
 * Snapshots kept on this node's disk: `<dir>/<id>/{capture/, snapshot.json}`, and names as
 * symlinks `<dir>/.names/<encoded name> → <id>` (creating a symlink is atomic, so two snapshots
 * cannot take one name). snapshot.json is written last, so a half-saved snapshot is never listed.
 */
export class LocalSnapshotCatalog implements SnapshotCatalog {
  constructor(private readonly dir: string) {}

  private names(): string {
    return path.join(this.dir, '.names');
  }

  async save(
    captureDir: string,
    base: Omit<SnapshotInfo, 'snapshotID' | 'createdAt' | 'updatedAt'>,
    envdToken?: string,
  ): Promise<SnapshotInfo> {
    for (const n of base.names) if (!NAME.test(n)) throw invalid(`invalid snapshot name '${n}'`);
    const id = newSandboxId();
    const now = new Date().toISOString();
    const info: SnapshotInfo = { ...base, snapshotID: id, createdAt: now, updatedAt: now };
    const target = path.join(this.dir, id);
    await mkdir(this.names(), { recursive: true });
    const taken: string[] = [];
    try {
      for (const n of base.names) {
        await symlink(id, path.join(this.names(), encodeURIComponent(n))).catch(
          (e: NodeJS.ErrnoException) => {
            throw e.code === 'EEXIST' ? conflict(`snapshot name '${n}' is already in use`) : e;
          },
        );
        taken.push(n);
      }
      await mkdir(target, { recursive: true });
      await rename(captureDir, path.join(target, 'capture'));
      const stored: Stored = { info, ...(envdToken ? { envdToken } : {}) };
      await writeFile(path.join(target, 'snapshot.json.tmp'), JSON.stringify(stored), { mode: 0o600 });
      await rename(path.join(target, 'snapshot.json.tmp'), path.join(target, 'snapshot.json'));
      return info;
    } catch (e) {
      await Promise.all(
        taken.map((n) => rm(path.join(this.names(), encodeURIComponent(n)), { force: true })),
      );
      await rm(target, { recursive: true, force: true });
      throw e;
    }
  }

  private async load(id: string): Promise<Stored | undefined> {
    if (!/^[a-z0-9]{1,64}$/.test(id)) return undefined;
    try {
      return JSON.parse(await readFile(path.join(this.dir, id, 'snapshot.json'), 'utf8')) as Stored;
    } catch {
      return undefined;
    }
  }

  private async idOf(idOrName: string): Promise<string | undefined> {
    if (await this.load(idOrName)) return idOrName;
    return readlink(path.join(this.names(), encodeURIComponent(idOrName))).catch(() => undefined);
  }

  async find(
    idOrName: string,
  ): Promise<{ info: SnapshotInfo; capture: Capture; envdToken?: string } | undefined> {
    const id = await this.idOf(idOrName);
    const stored = id ? await this.load(id) : undefined;
    if (!id || !stored) return undefined;
    const capture = await readCapture(path.join(this.dir, id, 'capture'));
    return { info: stored.info, capture, ...(stored.envdToken ? { envdToken: stored.envdToken } : {}) };
  }

  async list(filter: { sandboxId?: string; name?: string }): Promise<SnapshotInfo[]> {
    const ids = await readdir(this.dir).catch(() => [] as string[]);
    const all = (await Promise.all(ids.map((id) => this.load(id)))).flatMap((s) => (s ? [s.info] : []));
    return all
      .filter(
        (i) =>
          (!filter.sandboxId || i.sourceSandboxId === filter.sandboxId) &&
          (!filter.name || i.names.includes(filter.name)),
      )
      .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
  }

  async delete(idOrName: string): Promise<boolean> {
    const id = await this.idOf(idOrName);
    const stored = id ? await this.load(id) : undefined;
    if (!id || !stored) return false;
    // The record goes first, so a crash here leaves no listed snapshot without its capture.
    await rm(path.join(this.dir, id, 'snapshot.json'), { force: true });
    await Promise.all(
      stored.info.names.map((n) => rm(path.join(this.names(), encodeURIComponent(n)), { force: true })),
    );
    await rm(path.join(this.dir, id), { recursive: true, force: true });
    return true;
  }
}
