import type { SnapshotCatalog, SnapshotInfo } from '../orchestrator/index.js';
import type { Capture } from '../runtime/index.js';
import type { RuntimeCache, SnapshotRecord, SnapshotStore } from '@agentenv/snapshot';

interface Meta {
  info: SnapshotInfo;
  envdToken?: string;
}

const KIND = 'snapshot';

const metaOf = (r: SnapshotRecord) => r.meta as unknown as Meta;

/**
 * Snapshots in the snapshot repository (posix_fs or S3), shared by every node that points at it:
 * captures are stored as content-defined chunks (only what the repository lacks is written) and
 * rebuilt on demand into this node's bounded runtime cache.
 */
export class RepositorySnapshotCatalog implements SnapshotCatalog {
  constructor(
    private readonly store: SnapshotStore,
    private readonly cache: RuntimeCache,
  ) {}

  async save(
    captureDir: string,
    base: Omit<SnapshotInfo, 'snapshotID' | 'createdAt' | 'updatedAt'>,
    envdToken?: string,
  ): Promise<SnapshotInfo> {
    const now = new Date().toISOString();
    const previous = (
      await this.store.repository.listRecords({ labels: { sandboxId: base.sourceSandboxId } }, { limit: 1 })
    ).records[0];
    // A name in use fails as AliasTakenError, a conflict.
    const stored = await this.store.storeCapture(captureDir, {
      ...(previous ? { parent: previous.id } : {}),
      labels: { sandboxId: base.sourceSandboxId, kind: KIND },
      aliases: base.names,
      meta: {
        info: { ...base, snapshotID: '', createdAt: now, updatedAt: now },
        ...(envdToken ? { envdToken } : {}),
      },
    });
    const info: SnapshotInfo = { ...base, snapshotID: stored.snapshotId, createdAt: now, updatedAt: now };
    // The capture is already on this node: keep it as the cache entry instead of rebuilding it.
    // A cache full of captures in use only means a later restore rebuilds it; the snapshot stands.
    await this.cache.offer(stored.snapshotId, captureDir);
    return info;
  }

  async find(
    idOrName: string,
  ): Promise<{ info: SnapshotInfo; capture: Capture; envdToken?: string; release?: () => void } | undefined> {
    const record = await this.resolve(idOrName);
    if (!record) return undefined;
    const { capture, release } = await this.cache.acquire(record.id);
    const meta = metaOf(record);
    return {
      info: { ...meta.info, snapshotID: record.id },
      capture,
      release,
      ...(meta.envdToken ? { envdToken: meta.envdToken } : {}),
    };
  }

  async list(filter: { sandboxId?: string; name?: string }): Promise<SnapshotInfo[]> {
    const labels = { kind: KIND, ...(filter.sandboxId ? { sandboxId: filter.sandboxId } : {}) };
    const records = await this.store.listAll({ labels, ...(filter.name ? { alias: filter.name } : {}) });
    return records.map((r) => ({ ...metaOf(r).info, snapshotID: r.id }));
  }

  async delete(idOrName: string): Promise<boolean> {
    const record = await this.resolve(idOrName);
    if (!record) return false;
    await this.store.deleteSnapshot(record.id);
    await this.cache.remove(record.id).catch(() => undefined);
    return true;
  }

  /** The repository also holds other kinds of captures (pauses): only snapshots are found here. */
  private async resolve(idOrName: string): Promise<SnapshotRecord | undefined> {
    const record = await this.store.resolve(idOrName);
    return record?.labels.kind === KIND ? record : undefined;
  }
}
