import type { SandboxCore } from './core.js';
import type { LifecycleReason } from './observer.js';
import type { PauseUploads } from './pause-upload.js';
import type { SandboxRecord } from './record.js';

/**
 * Pause: checkpoint a running sandbox to this node's disk and release its CPU, memory and
 * network slot, then answer. Storing the capture in the shared repository (any node can resume
 * it) and this node's cache runs afterwards in the background (PauseUploads).
 */
export class Pauser {
  constructor(
    private readonly core: SandboxCore,
    private readonly uploads: PauseUploads,
  ) {}

  async pause(id: string, reason: LifecycleReason): Promise<void> {
    await this.core.transition(id, 'pause', (rec) => this.pauseWork(rec, reason));
    this.core.emit('paused', id, reason);
    this.uploads.start(id);
  }

  private async pauseWork(rec: SandboxRecord, reason: LifecycleReason): Promise<SandboxRecord> {
    const { d } = this.core;
    const live = this.core.mustLive(rec.sandboxId);
    const dir = d.captures.allocate(rec.sandboxId, 'pause');
    // Recorded before the capture, so recover() can find a capture completed just before a crash
    // and upload it then.
    d.store.update({ ...rec, captureDir: dir, uploadPending: true });
    try {
      await this.core.drainConnections(rec.sandboxId);
      await d.driver.checkpoint(live.handle, { dir, leaveRunning: false });
    } catch (err) {
      d.store.update(rec);
      await d.captures.remove(dir);
      throw err;
    }
    this.core.live.delete(rec.sandboxId);
    await this.core.releaseSlot(live.slot, rec.sandboxId);
    this.core.logs.add(rec.sandboxId, 'sandbox paused');
    const { handle: _h, ...rest } = rec;
    const forMemory = reason === 'memory_pressure' ? { pausedForMemory: true } : {};
    // pauseId stays: the previous pause, parent of this one once uploaded.
    return { ...rest, state: 'paused', ...forMemory, captureDir: dir, uploadPending: true };
  }
}
