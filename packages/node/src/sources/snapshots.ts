import type { Logger } from 'pino';
import { newSandboxId } from '@agentenv/common';
import type { SnapshotCatalog, SnapshotInfo, TakenSnapshot } from '../orchestrator/index.js';
import type { Capture } from '../runtime/index.js';
import {
  AliasTakenError,
  type RuntimeCache,
  type SnapshotRecord,
  type SnapshotStore,
} from '@agentenv/snapshot';
import { HeldSnapshotFiles, type HeldSnapshot } from './held-snapshots.js';

interface Meta {
  info: Omit<SnapshotInfo, 'stored'>;
  envdToken?: string;
}

/** A snapshot on this node only: its capture is pinned in the runtime cache until it is stored. */
interface Held extends HeldSnapshot {
  storing: boolean;
  deleted: boolean;
}

const KIND = 'snapshot';

const metaOf = (r: SnapshotRecord) => r.meta as unknown as Meta;
const infoOf = (r: SnapshotRecord): SnapshotInfo => ({ ...metaOf(r).info, snapshotID: r.id, stored: true });

/**
 * Snapshots in the snapshot repository (posix_fs or S3), shared by every node that points at it:
 * captures are stored as content-defined chunks (only what the repository lacks is written) and
 * rebuilt on demand into this node's bounded runtime cache.
 *
 * A snapshot is answered before it is stored: its capture moves into the runtime cache (a rename),
 * pinned, and a file in `heldDir` records it, so this node starts sandboxes from it at once and a
 * restart stores what a crash cut short. Other nodes find it once the repository holds it.
 */
export class RepositorySnapshotCatalog implements SnapshotCatalog {
  private readonly held = new Map<string, Held>();
  /** Names of snapshots being taken, before they are held: two takes never get the same name. */
  private readonly taking = new Set<string>();

  private constructor(
    private readonly store: SnapshotStore,
    private readonly cache: RuntimeCache,
    private readonly files: HeldSnapshotFiles,
    private readonly logger: Logger,
  ) {}

  /**
   * Reads what a previous process held and opens the runtime cache, whose start evicts only what
   * is not pinned: the held snapshots are pinned before it.
   */
  static async open(
    store: SnapshotStore,
    cache: RuntimeCache,
    heldDir: string,
    logger: Logger,
  ): Promise<RepositorySnapshotCatalog> {
    const files = new HeldSnapshotFiles(heldDir);
    const catalog = new RepositorySnapshotCatalog(store, cache, files, logger);
    for (const h of await files.load()) {
      try {
        cache.pin(h.info.snapshotID);
      } catch {
        await files.remove(h.info.snapshotID);
        continue;
      }
      catalog.held.set(h.info.snapshotID, { ...h, storing: false, deleted: false });
    }
    await cache.open();
    return catalog;
  }

  async take(
    captureDir: string,
    base: Omit<SnapshotInfo, 'snapshotID' | 'createdAt' | 'updatedAt' | 'stored'>,
    envdToken?: string,
  ): Promise<TakenSnapshot> {
    const release = this.reserve(base.names);
    try {
      for (const name of base.names) {
        const holder = await this.store.repository.resolveAlias(name);
        if (holder) throw new AliasTakenError(name, holder);
      }
      const now = new Date().toISOString();
      const info: SnapshotInfo = {
        ...base,
        snapshotID: newSandboxId(),
        createdAt: now,
        updatedAt: now,
        stored: false,
      };
      const held: Held = { info, ...(envdToken ? { envdToken } : {}), storing: false, deleted: false };
      if (!(await this.keep(captureDir, held))) {
        // No room on this node to keep it until it is stored: the answer waits for the repository.
        await this.commit(captureDir, held, false);
        await this.cache.offer(info.snapshotID, captureDir);
        return { info: { ...info, stored: true }, stored: Promise.resolve() };
      }
      this.held.set(info.snapshotID, held);
      return { info, stored: this.storeHeld(held) };
    } finally {
      release();
    }
  }

  storeLeftovers(): TakenSnapshot[] {
    return [...this.held.values()]
      .filter((h) => !h.storing)
      .map((h) => ({ info: h.info, stored: this.storeHeld(h) }));
  }

  async info(idOrName: string): Promise<SnapshotInfo | undefined> {
    const held = this.heldOf(idOrName);
    if (held) return held.info;
    const record = await this.resolve(idOrName);
    return record && infoOf(record);
  }

  async find(
    idOrName: string,
  ): Promise<{ info: SnapshotInfo; capture: Capture; envdToken?: string; release?: () => void } | undefined> {
    const held = this.heldOf(idOrName);
    if (held) {
      const { capture, release } = await this.cache.acquire(held.info.snapshotID);
      return { info: held.info, capture, release, ...(held.envdToken ? { envdToken: held.envdToken } : {}) };
    }
    const record = await this.resolve(idOrName);
    if (!record) return undefined;
    const { capture, release } = await this.cache.acquire(record.id);
    const meta = metaOf(record);
    return {
      info: infoOf(record),
      capture,
      release,
      ...(meta.envdToken ? { envdToken: meta.envdToken } : {}),
    };
  }

  async list(filter: { sandboxId?: string; name?: string }): Promise<SnapshotInfo[]> {
    const labels = { kind: KIND, ...(filter.sandboxId ? { sandboxId: filter.sandboxId } : {}) };
    const records = await this.store.listAll({ labels, ...(filter.name ? { alias: filter.name } : {}) });
    const stored = new Set(records.map((r) => r.id));
    const held = [...this.held.values()]
      .map((h) => h.info)
      .filter(
        (i) =>
          !stored.has(i.snapshotID) &&
          (!filter.sandboxId || i.sourceSandboxId === filter.sandboxId) &&
          (!filter.name || i.names.includes(filter.name)),
      )
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    return [...held, ...records.map(infoOf)];
  }

  async delete(idOrName: string): Promise<boolean> {
    const held = this.heldOf(idOrName);
    if (held) {
      const id = held.info.snapshotID;
      held.deleted = true;
      this.held.delete(id);
      await this.files.remove(id);
      // A store under way finishes first (it reads the capture) and then removes what it stored.
      if (!held.storing) await this.unhold(id);
      return true;
    }
    const record = await this.resolve(idOrName);
    if (!record) return false;
    await this.store.deleteSnapshot(record.id);
    await this.cache.remove(record.id).catch(() => undefined);
    return true;
  }

  /** Moves the capture into the cache, pinned, and records it; false when the cache has no room. */
  private async keep(captureDir: string, held: Held): Promise<boolean> {
    const id = held.info.snapshotID;
    this.cache.pin(id);
    try {
      if (!(await this.cache.offer(id, captureDir))) {
        this.cache.unpin(id);
        return false;
      }
      await this.files.add({ info: held.info, ...(held.envdToken ? { envdToken: held.envdToken } : {}) });
      return true;
    } catch (e) {
      await this.unhold(id);
      throw e;
    }
  }

  /** Stores a held snapshot in the repository; it then is an ordinary cache entry. */
  private async storeHeld(held: Held): Promise<void> {
    const id = held.info.snapshotID;
    held.storing = true;
    try {
      if (!this.cache.has(id)) {
        // Its capture did not survive a crash (a copy across filesystems cut short).
        this.held.delete(id);
        this.cache.unpin(id);
        await this.files.remove(id);
        throw new Error(`snapshot ${id} is lost: its capture is gone from this node`);
      }
      const capture = await this.cache.get(id);
      await this.commit(capture.dir, held, true);
      if (held.deleted) await this.store.deleteSnapshot(id);
      else {
        this.held.delete(id);
        await this.files.remove(id);
        this.cache.unpin(id);
      }
    } finally {
      held.storing = false;
      if (held.deleted) await this.unhold(id);
    }
  }

  /** Stores the capture; `answered`: the snapshot was answered, so a name taken meanwhile is dropped. */
  private async commit(captureDir: string, held: Held, answered: boolean): Promise<void> {
    const { stored: _s, ...info } = held.info;
    const previous = (
      await this.store.repository.listRecords({ labels: { sandboxId: info.sourceSandboxId } }, { limit: 1 })
    ).records[0];
    const options = (names: string[]) => ({
      id: info.snapshotID,
      ...(previous ? { parent: previous.id } : {}),
      labels: { sandboxId: info.sourceSandboxId, kind: KIND },
      aliases: names,
      meta: { info: { ...info, names }, ...(held.envdToken ? { envdToken: held.envdToken } : {}) },
    });
    try {
      await this.store.storeCapture(captureDir, options(info.names));
    } catch (e) {
      // Checked free when taken; another node took the name while this one was storing.
      if (!(e instanceof AliasTakenError) || !answered) throw e;
      this.logger.warn({ snapshotId: info.snapshotID, name: e.alias }, 'snapshot stored without its name');
      await this.store.storeCapture(captureDir, options(info.names.filter((n) => n !== e.alias)));
    }
  }

  private async unhold(id: string): Promise<void> {
    this.cache.unpin(id);
    await this.cache.remove(id).catch(() => undefined);
  }

  /** Claims names for a take; the returned function gives them back. */
  private reserve(names: readonly string[]): () => void {
    for (const name of names) {
      const holder = this.taking.has(name) ? '(being taken)' : this.heldOf(name)?.info.snapshotID;
      if (holder) throw new AliasTakenError(name, holder);
    }
    for (const name of names) this.taking.add(name);
    return () => names.forEach((n) => this.taking.delete(n));
  }

  private heldOf(idOrName: string): Held | undefined {
    return this.held.get(idOrName) ?? [...this.held.values()].find((h) => h.info.names.includes(idOrName));
  }

  /** The repository also holds other kinds of captures (pauses): only snapshots are found here. */
  private async resolve(idOrName: string): Promise<SnapshotRecord | undefined> {
    const record = await this.store.resolve(idOrName);
    return record?.labels.kind === KIND ? record : undefined;
  }
}
