import type { SandboxCore } from './core.js';
import { captureFilesystem } from './fs-pause.js';
import { refuseIfInUse } from './memory-pressure.js';
import type { LifecycleReason } from './observer.js';
import type { PauseUploads } from './pause-upload.js';
import type { PauseKind, SandboxRecord } from './record.js';

/**
 * Pause: checkpoint a running sandbox to this node's disk (or, filesystem only, capture its
 * writable layer) and release its CPU and memory, then answer; its network slot is torn down
 * after the answer. Storing the capture in the shared repository (any node can resume it) and
 * this node's cache runs afterwards in the background (PauseUploads), unless the caller waits for
 * it (`untilStored`).
 */
export class Pauser {
  constructor(
    private readonly core: SandboxCore,
    private readonly uploads: PauseUploads,
  ) {}

  async pause(
    id: string,
    reason: LifecycleReason,
    kind: PauseKind = 'memory',
    untilStored = false,
  ): Promise<void> {
    await this.core.transition(id, 'pause', (rec) => this.pauseWork(rec, reason, kind));
    this.core.emit('paused', id, reason);
    const upload = this.uploads.start(id);
    if (untilStored) await upload;
  }

  private async pauseWork(
    rec: SandboxRecord,
    reason: LifecycleReason,
    kind: PauseKind,
  ): Promise<SandboxRecord> {
    const { d } = this.core;
    if (reason === 'memory_pressure') refuseIfInUse(this.core.activity, rec.sandboxId);
    const live = this.core.mustLive(rec.sandboxId);
    const dir = d.captures.allocate(rec.sandboxId, 'pause');
    // Recorded before the capture, so recover() can find a capture completed just before a crash
    // and upload it then.
    d.store.update({ ...rec, captureDir: dir, uploadPending: true });
    try {
      if (kind === 'filesystem') {
        await captureFilesystem(this.core, rec, live, dir);
        await this.core.drainConnections(rec.sandboxId, 'pause');
        await d.driver.kill(live.handle);
      } else {
        await this.core.drainConnections(rec.sandboxId, 'pause');
        await d.driver.checkpoint(live.handle, { dir, leaveRunning: false });
      }
    } catch (err) {
      d.store.update(rec);
      await d.captures.remove(dir);
      throw err;
    }
    this.core.live.delete(rec.sandboxId);
    // Given back after the answer, as a kill does: tearing the namespace down is not the pause's.
    // Only once the checkpointed processes have exited: the slot may go to another sandbox next.
    void this.core.background.run('pause-release', rec.sandboxId, async () => {
      await d.driver.released(live.handle.id);
      await this.core.releaseSlot(live.slot, rec.sandboxId);
    });
    this.core.logs.add(
      rec.sandboxId,
      kind === 'filesystem' ? 'sandbox paused (filesystem only)' : 'sandbox paused',
    );
    // The kind travels with the stored pause, so whichever node resumes it knows how.
    const { handle: _h, pauseKind: _k, ...rest } = rec;
    const forMemory = reason === 'memory_pressure' ? { pausedForMemory: true } : {};
    const marked = kind === 'filesystem' ? { pauseKind: kind } : {};
    // pauseId stays: the previous pause, parent of this one once uploaded.
    return { ...rest, state: 'paused', ...forMemory, ...marked, captureDir: dir, uploadPending: true };
  }
}
