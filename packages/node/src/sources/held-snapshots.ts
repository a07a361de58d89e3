import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { SnapshotInfo } from '../orchestrator/index.js';

/** A snapshot taken on this node whose store into the shared repository has not ended yet. */
export interface HeldSnapshot {
  readonly info: SnapshotInfo;
  readonly envdToken?: string;
}

const SUFFIX = '.json';

/**
 * The durable list of snapshots that exist on this node only: one file per snapshot, written
 * (and synced) before the snapshot is answered, removed once the repository holds it. What a
 * crashed node left here is stored again by its next start. The files carry the snapshot's envd
 * token, so they are root's only.
 */
export class HeldSnapshotFiles {
  constructor(private readonly dir: string) {}

  /** What a previous process left; files that cannot be read are dropped. */
  async load(): Promise<HeldSnapshot[]> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const out: HeldSnapshot[] = [];
    for (const name of await readdir(this.dir)) {
      const path = join(this.dir, name);
      const held = name.endsWith(SUFFIX) ? await readHeld(path) : undefined;
      // A file is only ever named for the snapshot it holds; one that is not is dropped here.
      if (held && `${held.info.snapshotID}${SUFFIX}` === name) out.push(held);
      else await rm(path, { force: true });
    }
    return out;
  }

  async add(held: HeldSnapshot): Promise<void> {
    const path = this.pathOf(held.info.snapshotID);
    const tmp = `${path}.tmp`;
    const fh = await open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(JSON.stringify(held));
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
    await syncDir(this.dir);
  }

  async remove(snapshotId: string): Promise<void> {
    await rm(this.pathOf(snapshotId), { force: true });
  }

  private pathOf(snapshotId: string): string {
    return join(this.dir, `${snapshotId}${SUFFIX}`);
  }
}

async function readHeld(path: string): Promise<HeldSnapshot | undefined> {
  try {
    const held = JSON.parse(await readFile(path, 'utf8')) as HeldSnapshot;
    return typeof held.info?.snapshotID === 'string' ? held : undefined;
  } catch {
    return undefined;
  }
}

/** The rename above is durable only once its directory is. */
async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
