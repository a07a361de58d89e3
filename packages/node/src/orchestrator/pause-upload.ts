import type { SandboxCore } from './core.js';
import { PauseSealer } from './persistence/index.js';
import type { SandboxRecord } from './record.js';

/**
 * Stores pauses in the shared repository after the pause has answered. A paused record whose
 * `uploadPending` is set names its local capture (`captureDir`) as its state; `pauseId` beside it
 * is the previous pause, the parent of this one. The local capture is removed or moved into the
 * cache only once the repository holds the new pause, so a crash at any point leaves the sandbox
 * resumable from one of them. The upload runs outside the sandbox's lock: a resume or a kill
 * meanwhile wins, and the upload's result is then dropped as obsolete. The new pause is this
 * node's claim from the moment other nodes can see it until it is the sandbox's state here, so
 * no other node can resume it while this one may still resume the local capture.
 */
/** The lifecycle stage of a pause's upload, ended once the shared repository holds the pause. */
export const PAUSE_UPLOAD_STAGE = 'pause-upload';

export class PauseUploads {
  private readonly sealer: PauseSealer;
  /** The uploads under way, by sandbox: a resume or a kill stops its sandbox's. */
  private readonly running = new Map<string, AbortController>();

  constructor(private readonly core: SandboxCore) {
    this.sealer = PauseSealer.forNode(core.d.config.apiKey, core.d.nodeSecret);
  }

  /** Starts the upload of a sandbox's pending pause in the background; resolves once it ended. */
  start(sandboxId: string): Promise<void> {
    return this.core.background.run(PAUSE_UPLOAD_STAGE, sandboxId, () => this.upload(sandboxId));
  }

  /** After a restart: restarts every upload that the previous process did not finish. */
  restartPending(): number {
    const pending = this.core.d.store.all().filter(isPending);
    for (const rec of pending) void this.start(rec.sandboxId);
    return pending.length;
  }

  /**
   * Stops a sandbox's upload (its resume or kill is about to make it obsolete), so that it does
   * not take the CPU the resume needs. An upload stopped while the sandbox stays paused (the
   * resume failed) starts again.
   */
  cancel(sandboxId: string): void {
    this.running.get(sandboxId)?.abort();
  }

  /**
   * Resolves once no background work runs, uploads started meanwhile included (shutdown waits so
   * the repository holds every pause).
   */
  idle(): Promise<void> {
    return this.core.background.idle();
  }

  private async upload(sandboxId: string): Promise<void> {
    const { d } = this.core;
    const rec = d.store.get(sandboxId);
    if (!rec || !isPending(rec)) return;
    const dir = rec.captureDir;
    const t0 = this.core.clock.now();
    const stop = new AbortController();
    this.running.set(sandboxId, stop);
    let pauseId: string | undefined;
    let failure: unknown;
    try {
      pauseId = await d.pauses.save(dir, this.sealer.seal(rec), rec.pauseId, stop.signal);
    } catch (err) {
      failure = err;
    } finally {
      if (this.running.get(sandboxId) === stop) this.running.delete(sandboxId);
    }
    await this.core.mutex.run(sandboxId, async () => {
      const cur = d.store.get(sandboxId);
      if (!cur || !isPending(cur) || cur.captureDir !== dir) {
        // Resumed, paused again or killed meanwhile: this pause is nobody's state any more.
        if (pauseId) await this.core.dropPause(sandboxId, pauseId);
        return;
      }
      if (!pauseId && stop.signal.aborted) {
        // Stopped for a resume that did not happen: the sandbox is still paused, with this capture.
        void this.start(sandboxId);
        return;
      }
      if (pauseId) await this.stored(cur, dir, pauseId);
      else await this.keptLocal(cur, failure);
      // How long the pause was on this node's disk only (the cluster agent reports it stored at once).
      if (pauseId) d.observer.stage(PAUSE_UPLOAD_STAGE, this.core.clock.now() - t0);
      else d.observer.failed(PAUSE_UPLOAD_STAGE);
    });
  }

  /**
   * The repository holds the pause: it becomes the state, other nodes may take it over from now
   * on, and the capture goes to the cache.
   */
  private async stored(rec: PendingRecord, dir: string, pauseId: string): Promise<void> {
    const { d } = this.core;
    const { captureDir: _c, uploadPending: _u, ...rest } = rec;
    d.store.update({ ...rest, pauseId });
    // Released only once it is the state: until then this node may resume the local capture.
    await d.pauses.release(pauseId).catch((err) => {
      d.logger.warn({ err, sandboxId: rec.sandboxId, pauseId }, 'pause not released to other nodes');
    });
    if (rec.pauseId) await this.core.dropPause(rec.sandboxId, rec.pauseId);
    this.core.logs.add(rec.sandboxId, `pause stored in the snapshot repository (${pauseId})`);
    const kept = await d.pauses.keep(pauseId, dir).catch((err) => {
      d.logger.warn({ err, sandboxId: rec.sandboxId }, 'pause not cached');
      return false;
    });
    // Not in the cache: the local capture stays the faster way back.
    if (!kept) d.store.update({ ...rest, pauseId, captureDir: dir });
  }

  /** The repository failed: the sandbox stays paused on this node only, from its local capture. */
  private async keptLocal(rec: PendingRecord, err: unknown): Promise<void> {
    const { d } = this.core;
    d.logger.warn({ err, sandboxId: rec.sandboxId }, 'pause kept on this node only');
    const { uploadPending: _u, pauseId: previous, ...rest } = rec;
    d.store.update(rest);
    // The stored pause is older than this capture: nobody may resume from it any more.
    if (previous) await this.core.dropPause(rec.sandboxId, previous);
  }
}

type PendingRecord = SandboxRecord & { captureDir: string; uploadPending: true };

function isPending(rec: SandboxRecord): rec is PendingRecord {
  return rec.state === 'paused' && rec.uploadPending === true && rec.captureDir !== undefined;
}
