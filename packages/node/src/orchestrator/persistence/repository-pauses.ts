import { createHash } from 'node:crypto';
import { DomainError, newSandboxId } from '@agentenv/common';
import type { Capture } from '../../runtime/index.js';
import type { RuntimeCache, SnapshotStore } from '@agentenv/snapshot';
import type { PauseRepository, SealedPause, StoredPause } from '../seams.js';

const KIND = 'pause';
const claimName = (pauseId: string) => `pause/${pauseId}`;

/** Where a record's meta keeps the stored pause (see storedPause). */
const SEALED_RECORD = 'pausedSandbox';
const SECRETS = 'sealedSecrets';
const PLAIN_RECORD = 'sandbox';

/**
 * Pauses stored in the snapshot repository, like snapshots (content-defined chunks, so a pause
 * after a pause writes little) but hidden from the snapshot catalogue. Claims are per pause and
 * held by a stable node id, so a node that crashed after claiming can claim again. A pause is
 * claimed by the node that stores it until that node releases it.
 */
export class RepositoryPauses implements PauseRepository {
  private readonly owner: string;

  constructor(
    private readonly store: SnapshotStore,
    private readonly cache: RuntimeCache,
    nodeSecret: string,
  ) {
    this.owner = `node-${createHash('sha256').update(`pause-owner:${nodeSecret}`).digest('hex').slice(0, 16)}`;
  }

  async save(captureDir: string, pause: SealedPause, parent?: string, signal?: AbortSignal): Promise<string> {
    // Claimed before its record exists: no other node ever sees the pause unclaimed, so none can
    // resume it while this node may still resume the sandbox from its local capture.
    const id = newSandboxId();
    const repo = this.store.repository;
    if ((await repo.claim(claimName(id), this.owner)) !== this.owner)
      throw new DomainError('internal', `pause id ${id} is claimed already`);
    try {
      await this.store.storeCapture(captureDir, {
        id,
        ...(parent ? { parent } : {}),
        labels: { sandboxId: pause.sandbox.sandboxId, kind: KIND },
        meta: { [SEALED_RECORD]: pause.sandbox, [SECRETS]: pause.sealed },
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      await repo.deleteClaim(claimName(id)).catch(() => undefined);
      throw err;
    }
    return id;
  }

  release(pauseId: string): Promise<void> {
    return this.store.repository.deleteClaim(claimName(pauseId));
  }

  keep(pauseId: string, captureDir: string): Promise<boolean> {
    return this.cache.offer(pauseId, captureDir);
  }

  async claim(pauseId: string): Promise<boolean> {
    const repo = this.store.repository;
    if ((await repo.claim(claimName(pauseId), this.owner)) !== this.owner) return false;
    // A pause is dropped record first, claim second: a claim without its record is worthless.
    if (await repo.getRecord(pauseId)) return true;
    await repo.deleteClaim(claimName(pauseId));
    return false;
  }

  open(pauseId: string): Promise<{ capture: Capture; release: () => void }> {
    return this.cache.acquire(pauseId);
  }

  async drop(pauseId: string): Promise<void> {
    await this.cache.remove(pauseId).catch(() => undefined);
    // Taking the claim first: a node that claimed it runs the sandbox from it.
    if ((await this.store.repository.claim(claimName(pauseId), this.owner)) !== this.owner) return;
    // Blobs stay for a later collection: the next pause of the sandbox shares most of them.
    await this.store.deleteSnapshot(pauseId, { collect: false });
    await this.store.repository.deleteClaim(claimName(pauseId));
  }

  async findPaused(sandboxId: string): Promise<{ pauseId: string; pause: StoredPause } | undefined> {
    const newest = (
      await this.store.repository.listRecords({ labels: { sandboxId, kind: KIND } }, { limit: 1 })
    ).records[0];
    const pause = newest && storedPause(newest.meta);
    if (!pause || pause.sandbox.sandboxId !== sandboxId) return undefined;
    return { pauseId: newest.id, pause };
  }
}

/**
 * The stored pause in a record's meta: its record under a key that nodes from before sealing do
 * not read (they would take the sandbox without its tokens), or, written by such a node, the
 * whole record in plain text.
 */
function storedPause(meta: Readonly<Record<string, unknown>>): StoredPause | undefined {
  const sealedRecord = meta[SEALED_RECORD];
  if (isRecordOf(sealedRecord)) {
    const sealed = meta[SECRETS];
    return typeof sealed === 'string' ? { sandbox: sealedRecord, sealed } : undefined;
  }
  return isRecordOf(meta[PLAIN_RECORD]) ? { sandbox: meta[PLAIN_RECORD] } : undefined;
}

const isRecordOf = (v: unknown): v is StoredPause['sandbox'] =>
  typeof v === 'object' && v !== null && typeof (v as { sandboxId?: unknown }).sandboxId === 'string';
