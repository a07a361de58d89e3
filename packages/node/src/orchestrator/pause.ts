import type { SandboxCore } from './core.js';
import type { LifecycleReason } from './observer.js';
import { captureFilesystem } from './fs-pause.js';
import type { PauseKind, SandboxRecord } from './record.js';

/**
 * Pause: checkpoint a running sandbox to this node's disk and release its CPU, memory and
 * network slot; then store the capture in the shared repository (any node can resume it) and
 * this node's cache (a resume here needs no rebuild).
 */
export class Pauser {
  constructor(private readonly core: SandboxCore) {}

  async pause(id: string, reason: LifecycleReason, kind: PauseKind = 'memory'): Promise<void> {
    await this.core.transition(id, 'pause', (rec) => this.pauseWork(rec, kind));
    this.core.emit('paused', id, reason);
  }

  private async pauseWork(rec: SandboxRecord, kind: PauseKind): Promise<SandboxRecord> {
    const { d } = this.core;
    const live = this.core.mustLive(rec.sandboxId);
    const dir = d.captures.allocate(rec.sandboxId, 'pause');
    // Recorded before the capture, so recover() can find a capture completed just before a crash.
    d.store.update({ ...rec, captureDir: dir });
    try {
      if (kind === 'filesystem') {
        await captureFilesystem(this.core, rec, live, dir);
        await this.core.drainConnections(rec.sandboxId);
        await d.driver.kill(live.handle);
      } else {
        await this.core.drainConnections(rec.sandboxId);
        await d.driver.checkpoint(live.handle, { dir, leaveRunning: false });
      }
    } catch (err) {
      d.store.update(rec);
      await d.captures.remove(dir);
      throw err;
    }
    this.core.live.delete(rec.sandboxId);
    await this.core.releaseSlot(live.slot, rec.sandboxId);
    this.core.logs.add(
      rec.sandboxId,
      kind === 'filesystem' ? 'sandbox paused (filesystem only)' : 'sandbox paused',
    );
    // The kind travels with the stored pause, so whichever node resumes it knows how.
    const { pauseKind: _k, ...base } = rec;
    const marked: SandboxRecord = kind === 'filesystem' ? { ...base, pauseKind: kind } : base;
    const { handle: _h, pauseId: _p, captureDir: _c, ...rest } = marked;
    return { ...rest, state: 'paused', ...(await this.storePause(marked, dir)) };
  }

  /**
   * Puts a pause capture into the shared repository and then into this node's cache. When the
   * repository fails the sandbox stays paused on this node only, from its local capture. Never
   * throws: the sandbox is paused either way.
   */
  private async storePause(
    rec: SandboxRecord,
    dir: string,
  ): Promise<{ captureDir?: string; pauseId?: string }> {
    const { d } = this.core;
    let pauseId: string;
    try {
      pauseId = await d.pauses.save(dir, rec, rec.pauseId);
    } catch (err) {
      d.logger.warn({ err, sandboxId: rec.sandboxId }, 'pause kept on this node only');
      // The stored pause is older than this capture: nobody may resume from it any more.
      if (rec.pauseId) await this.core.dropPause(rec.sandboxId, rec.pauseId);
      return { captureDir: dir };
    }
    // From here the repository holds the state: a crash before the end still leaves it paused.
    const { captureDir: _c, ...rest } = rec;
    d.store.update({ ...rest, pauseId });
    if (rec.pauseId) await this.core.dropPause(rec.sandboxId, rec.pauseId);
    const kept = await d.pauses.keep(pauseId, dir).catch((err) => {
      d.logger.warn({ err, sandboxId: rec.sandboxId }, 'pause not cached');
      return false;
    });
    return kept ? { pauseId } : { pauseId, captureDir: dir };
  }
}
