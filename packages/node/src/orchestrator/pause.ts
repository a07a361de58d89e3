import type { Live, SandboxCore, Suspended } from './core.js';
import { captureFilesystem } from './fs-pause.js';
import { refuseIfInUse } from './memory-pressure.js';
import type { LifecycleReason } from './observer.js';
import type { PauseUploads } from './pause-upload.js';
import type { PauseKind, SandboxRecord } from './record.js';

/** The lifecycle stage of a pause's checkpoint, taken after the pause answered. */
export const PAUSE_CAPTURE_STAGE = 'pause-capture';

/**
 * Pause: a running sandbox is suspended where it is (its processes stop; nothing it does is seen
 * after the answer), then the answer. Its checkpoint to this node's disk follows in the
 * background, after which its CPU, memory and network slot are given back. Should the node's
 * process die before that checkpoint is complete, the runtime takes it when the node starts again
 * (RuntimeDriver.suspend), provided the suspended sandbox outlived the process (on a host it does;
 * in a container whose init ends with the node it does not). A filesystem-only pause
 * captures the writable layer before it answers. Storing the capture in the shared repository
 * (any node can resume it) and this node's cache runs afterwards (PauseUploads), unless the caller
 * waits for it (`untilStored`).
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
    const held = this.core.suspended.get(id);
    const stored = held
      ? this.core.background.run(PAUSE_CAPTURE_STAGE, id, () => this.afterCapture(id, held))
      : this.uploads.start(id);
    if (untilStored) await stored;
    // Pressure relief pauses one sandbox after another, each giving its memory back first; a
    // shutdown pauses a few at a time, each checkpoint ended before the next starts.
    else if (reason === 'memory_pressure' || reason === 'shutdown') await held?.captured;
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
        await d.driver.suspend(live.handle, dir);
      }
    } catch (err) {
      d.store.update(rec);
      await d.captures.remove(dir);
      throw err;
    }
    this.core.live.delete(rec.sandboxId);
    if (kind === 'filesystem') this.core.releaseWhenGone(rec.sandboxId, live);
    else this.capture(rec.sandboxId, live, dir);
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

  /** Starts the suspended sandbox's checkpoint; it stays suspended after it (leaveRunning). */
  private capture(id: string, live: Live, dir: string): void {
    const t0 = this.core.clock.now();
    const captured = this.core.d.driver.checkpoint(live.handle, { dir, leaveRunning: true }).then(
      () => {
        this.core.d.observer.stage(PAUSE_CAPTURE_STAGE, this.core.clock.now() - t0);
        return true;
      },
      (err: unknown) => {
        this.core.failed(PAUSE_CAPTURE_STAGE, id, err);
        return false;
      },
    );
    this.core.suspended.set(id, { live, captured });
  }

  /**
   * Once the checkpoint ended: the suspended sandbox is stopped and the capture stored, unless a
   * resume or a kill took the sandbox over meanwhile. A failed checkpoint leaves it suspended in
   * memory (a resume runs it on; a shutdown tries the checkpoint again, and so does the runtime
   * of the next start after a crash); one that died with it is gone (Exits).
   */
  private async afterCapture(id: string, held: Suspended): Promise<void> {
    const ok = await held.captured;
    let upload = false;
    await this.core.mutex.run(id, async () => {
      if (this.core.suspended.get(id) !== held || !ok) return;
      await this.core.stopSuspended(id, held);
      upload = true;
    });
    if (upload) await this.uploads.start(id);
  }

  /**
   * At shutdown: a suspended sandbox whose checkpoint failed gets one more, so that its pause
   * outlives the node's process (the runtime stops what is left when it closes).
   */
  async captureLeftovers(): Promise<void> {
    for (const [id, held] of [...this.core.suspended]) {
      if (await held.captured) continue;
      await this.core.mutex.run(id, async () => {
        const dir = this.core.d.store.get(id)?.captureDir;
        if (this.core.suspended.get(id) === held && dir) this.capture(id, held.live, dir);
      });
      const again = this.core.suspended.get(id);
      if (again && again !== held) await this.afterCapture(id, again);
    }
  }
}
