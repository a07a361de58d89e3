import { RepositoryUnavailableError, type Capture } from '@agentenv/snapshot';
import type { PauseRepository, SealedPause, StoredPause } from '@agentenv/node/server';
import type { FakeCapture, FakeDisk } from './disk.js';
import { Faults } from './faults.js';

export type PauseStep = 'save' | 'committed' | 'release' | 'keep' | 'claim' | 'open' | 'drop' | 'find';

interface Stored {
  readonly seq: number;
  readonly pause: StoredPause;
  readonly capture: FakeCapture;
  readonly parent?: string;
}

/** The shared repository's pauses and claims; every node's FakePauses over it sees the same. */
export class FakePauseStorage {
  readonly pauses = new Map<string, Stored>();
  readonly claims = new Map<string, string>();
  readonly faults = new Faults<PauseStep>(
    (s) =>
      new RepositoryUnavailableError('unreachable', `fake: the snapshot repository is unreachable (${s})`),
  );
  seq = 0;

  /** Writes a stored pause as another node (an older or a newer one) would have. */
  put(pauseId: string, pause: StoredPause, capture: FakeCapture): void {
    this.pauses.set(pauseId, { seq: ++this.seq, pause, capture });
  }
}

/**
 * One node's view of the pauses in a FakePauseStorage: captures come from and go to this node's
 * FakeDisk; the node's runtime cache is `/cache/<pauseId>` on it; claims are held as `owner`.
 */
export class FakePauses implements PauseRepository {
  constructor(
    readonly storage: FakePauseStorage,
    private readonly disk: FakeDisk,
    private readonly owner: string,
  ) {}

  static cacheDir(pauseId: string): string {
    return `/cache/${pauseId}`;
  }

  async save(captureDir: string, pause: SealedPause, parent?: string, signal?: AbortSignal): Promise<string> {
    await this.storage.faults.check('save');
    signal?.throwIfAborted();
    const capture = this.disk.read(captureDir);
    if (!capture?.complete) throw new Error(`fake pauses: no capture at ${captureDir}`);
    const id = `pause${String(this.storage.seq + 1).padStart(6, '0')}`;
    // Claimed for this node in the same step that makes it visible, as the repository does.
    this.storage.claims.set(id, this.owner);
    this.storage.pauses.set(id, { seq: ++this.storage.seq, pause, capture, ...(parent ? { parent } : {}) });
    // Stored and visible to every node, not yet returned to the uploading one.
    await this.storage.faults.check('committed');
    return id;
  }

  async release(pauseId: string): Promise<void> {
    await this.storage.faults.check('release');
    this.storage.claims.delete(pauseId);
  }

  async keep(pauseId: string, captureDir: string): Promise<boolean> {
    await this.storage.faults.check('keep');
    this.disk.move(captureDir, FakePauses.cacheDir(pauseId));
    return true;
  }

  async claim(pauseId: string): Promise<boolean> {
    await this.storage.faults.check('claim');
    const holder = this.storage.claims.get(pauseId) ?? this.owner;
    this.storage.claims.set(pauseId, holder);
    if (holder !== this.owner) return false;
    if (this.storage.pauses.has(pauseId)) return true;
    this.storage.claims.delete(pauseId);
    return false;
  }

  async open(pauseId: string): Promise<{ capture: Capture; release: () => void }> {
    await this.storage.faults.check('open');
    const dir = FakePauses.cacheDir(pauseId);
    if (!this.disk.has(dir)) {
      const stored = this.storage.pauses.get(pauseId);
      if (!stored) throw new Error(`fake pauses: no pause ${pauseId}`);
      this.disk.write(dir, stored.capture);
    }
    return { capture: { dir, meta: this.disk.read(dir)!.meta }, release: () => undefined };
  }

  async drop(pauseId: string): Promise<void> {
    await this.storage.faults.check('drop');
    this.disk.delete(FakePauses.cacheDir(pauseId));
    // A pause another node claimed is that node's sandbox now.
    const holder = this.storage.claims.get(pauseId);
    if (holder !== undefined && holder !== this.owner) return;
    this.storage.pauses.delete(pauseId);
    this.storage.claims.delete(pauseId);
  }

  async findPaused(sandboxId: string): Promise<{ pauseId: string; pause: StoredPause } | undefined> {
    await this.storage.faults.check('find');
    const newest = [...this.storage.pauses]
      .filter(([, p]) => p.pause.sandbox.sandboxId === sandboxId)
      .sort(([, a], [, b]) => b.seq - a.seq)[0];
    return newest && { pauseId: newest[0], pause: newest[1].pause };
  }
}
