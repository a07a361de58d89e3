import { AliasTakenError, RepositoryUnavailableError, type Capture } from '@agentenv/snapshot';
import type { SnapshotCatalog, SnapshotInfo, TakenSnapshot } from '@agentenv/node/server';
import type { FakeDisk } from './disk.js';
import { Faults } from './faults.js';

export type SnapshotStep = 'take' | 'find' | 'list' | 'delete';

interface Stored {
  info: SnapshotInfo;
  envdToken?: string;
}

/**
 * Snapshots in memory; their captures live on the node's FakeDisk under `/snapshots/<id>`. A
 * snapshot is stored as it is taken.
 */
export class FakeSnapshotCatalog implements SnapshotCatalog {
  readonly faults = new Faults<SnapshotStep>(
    (s) =>
      new RepositoryUnavailableError('unreachable', `fake: the snapshot repository is unreachable (${s})`),
  );
  private readonly snapshots = new Map<string, Stored>();
  private seq = 0;

  constructor(
    private readonly disk: FakeDisk,
    private readonly now: () => number = Date.now,
  ) {}

  async take(
    captureDir: string,
    info: Omit<SnapshotInfo, 'snapshotID' | 'createdAt' | 'updatedAt' | 'stored'>,
    envdToken?: string,
  ): Promise<TakenSnapshot> {
    await this.faults.check('take');
    for (const name of info.names) {
      const holder = this.byName(name);
      if (holder) throw new AliasTakenError(name, holder.info.snapshotID);
    }
    const id = `snap${String(++this.seq).padStart(6, '0')}`;
    const at = new Date(this.now()).toISOString();
    const full: SnapshotInfo = { ...info, snapshotID: id, createdAt: at, updatedAt: at, stored: true };
    this.disk.move(captureDir, `/snapshots/${id}`);
    this.snapshots.set(id, { info: full, ...(envdToken ? { envdToken } : {}) });
    return { info: full, stored: Promise.resolve() };
  }

  storeLeftovers(): TakenSnapshot[] {
    return [];
  }

  async info(idOrName: string): Promise<SnapshotInfo | undefined> {
    await this.faults.check('find');
    return (this.snapshots.get(idOrName) ?? this.byName(idOrName))?.info;
  }

  async find(
    idOrName: string,
  ): Promise<{ info: SnapshotInfo; capture: Capture; envdToken?: string; release?: () => void } | undefined> {
    await this.faults.check('find');
    const s = this.snapshots.get(idOrName) ?? this.byName(idOrName);
    if (!s) return undefined;
    const dir = `/snapshots/${s.info.snapshotID}`;
    return {
      info: s.info,
      capture: { dir, meta: this.disk.read(dir)!.meta },
      ...(s.envdToken ? { envdToken: s.envdToken } : {}),
      release: () => undefined,
    };
  }

  async list(filter: { sandboxId?: string; name?: string }): Promise<SnapshotInfo[]> {
    await this.faults.check('list');
    return [...this.snapshots.values()]
      .map((s) => s.info)
      .filter(
        (i) =>
          (!filter.sandboxId || i.sourceSandboxId === filter.sandboxId) &&
          (!filter.name || i.names.includes(filter.name)),
      )
      .reverse();
  }

  async delete(idOrName: string): Promise<boolean> {
    await this.faults.check('delete');
    const s = this.snapshots.get(idOrName) ?? this.byName(idOrName);
    if (!s) return false;
    this.snapshots.delete(s.info.snapshotID);
    this.disk.delete(`/snapshots/${s.info.snapshotID}`);
    return true;
  }

  private byName(name: string): Stored | undefined {
    return [...this.snapshots.values()].find((s) => s.info.names.includes(name));
  }
}
