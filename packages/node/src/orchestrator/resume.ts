import { DomainError, notFound } from '@agentenv/common';
import type { Capture, Resources } from '../runtime/index.js';
import type { Admission } from './admission.js';
import type { EndTimeMode, Live, SandboxCore, Suspended } from './core.js';
import type { LifecycleReason } from './observer.js';
import { PauseSealer } from './persistence/index.js';
import { captureFilesystem, restoreFilesystem } from './fs-pause.js';
import type { SandboxRecord } from './record.js';

/**
 * How a paused sandbox comes back (the SDK's onResume): its memory restored, or booted afresh
 * with the files it had, its processes gone. A filesystem-only pause always boots afresh.
 */
export type ResumeBoot = 'restore' | 'reboot';

/** What a connect does beyond resuming: how the end time moves, why, and how it boots. */
export interface ConnectOptions {
  endTime?: EndTimeMode;
  reason?: LifecycleReason;
  boot?: ResumeBoot;
}

/**
 * Resume: restore a paused sandbox from its local capture or its pause in the shared repository,
 * taking it over first when another node sharing the repository paused it.
 */
export class Resumer {
  private readonly sealer: PauseSealer;

  constructor(
    private readonly core: SandboxCore,
    private readonly admission: Admission,
  ) {
    this.sealer = PauseSealer.forNode(core.d.config.apiKey, core.d.nodeSecret);
  }

  /** Resumes a paused sandbox (or only extends a running one's life); true when it resumed. */
  async connect(id: string, timeoutSecs: number, how: ConnectOptions = {}): Promise<boolean> {
    const { endTime = 'extend', reason = 'request', boot = 'restore' } = how;
    await this.takeOver(id);
    let resumed = false;
    await this.core.transition(
      id,
      'resume',
      async (rec) => {
        resumed = true;
        return this.resumeWork(rec, timeoutSecs, boot);
      },
      (rec) => {
        if (rec.state !== 'running') return false;
        this.core.setEndTime(rec, timeoutSecs, endTime);
        return true;
      },
    );
    if (resumed) this.core.emit('resumed', id, reason);
    return resumed;
  }

  /**
   * A sandbox this node has no record of, paused by another node sharing the repository, is
   * taken over: its newest pause claimed and its record kept here.
   */
  private async takeOver(id: string): Promise<void> {
    const { d } = this.core;
    if (d.store.get(id)) return;
    const found = await d.pauses.findPaused(id);
    if (!found) return;
    // Read before the claim: a pause this node cannot read is left for a node that can.
    const record = this.sealer.open(found.pauseId, found.pause);
    if (!(await d.pauses.claim(found.pauseId))) return;
    // Two connects here may both have claimed it; the first keeps the record.
    if (d.store.get(id)) return;
    d.store.insert(record);
    this.core.logs.add(id, `sandbox taken over from the snapshot repository (pause ${found.pauseId})`);
  }

  /**
   * Under the sandbox's lock, before it resumes: its stored pause (unless a local capture not yet
   * uploaded is its state) must be this node's claim. One that another node claimed was resumed
   * there, and is forgotten here.
   */
  private async holdPause(rec: SandboxRecord): Promise<void> {
    const { d } = this.core;
    if (!rec.pauseId || rec.uploadPending || (await d.pauses.claim(rec.pauseId))) return;
    d.store.delete(rec.sandboxId);
    await this.core.discardCaptures(rec.sandboxId);
    this.core.forget(rec.sandboxId);
    throw notFound(`sandbox ${rec.sandboxId} was resumed or removed on another node`);
  }

  private async resumeWork(
    rec: SandboxRecord,
    timeoutSecs: number,
    boot: ResumeBoot,
  ): Promise<SandboxRecord> {
    const held = this.core.suspended.get(rec.sandboxId);
    if (held && (await this.runOn(rec, held, boot))) return this.running(rec, held.live, timeoutSecs);
    await this.holdPause(rec);
    const live = await this.restoreLive(rec, boot).catch(async (err: unknown) => {
      await this.letPauseGo(rec);
      throw err;
    });
    return this.running(rec, live, timeoutSecs);
  }

  /**
   * A sandbox whose pause's checkpoint is under way (or failed) is still suspended on this node:
   * once the checkpoint ended it runs on where it stopped, which is what restoring the capture
   * would give, sooner. A reboot stops it instead and boots from the capture (unless the
   * checkpoint failed: its memory is then all there is). False: it was stopped, and the resume
   * goes on as from any pause.
   */
  private async runOn(rec: SandboxRecord, held: Suspended, boot: ResumeBoot): Promise<boolean> {
    const captured = await held.captured;
    if (boot === 'reboot' && captured) {
      await this.core.stopSuspended(rec.sandboxId, held);
      return false;
    }
    await this.core.d.driver.resume(held.live.handle);
    this.core.suspended.delete(rec.sandboxId);
    return true;
  }

  /** The record of a sandbox running again in `live`. */
  private async running(rec: SandboxRecord, live: Live, timeoutSecs: number): Promise<SandboxRecord> {
    this.core.live.set(rec.sandboxId, live);
    // Local captures are obsolete once the sandbox runs on (also one a crash left behind after
    // the repository took it); the repository's pause stays as the parent of the next one.
    await this.core.discardCaptures(rec.sandboxId);
    this.core.logs.add(rec.sandboxId, 'sandbox resumed');
    this.core.activity.touch(rec.sandboxId);
    // An upload still running for the pause finds the sandbox running and drops what it stored.
    const { captureDir: _c, uploadPending: _u, pausedForMemory: _m, pauseKind: _k, ...rest } = rec;
    return { ...rest, state: 'running', handle: live.handle, endAt: this.core.endIn(timeoutSecs) };
  }

  /** The sandbox brought back from its local capture or its stored pause, once admitted. */
  private restoreLive(rec: SandboxRecord, boot: ResumeBoot): Promise<Live> {
    const { d } = this.core;
    const resources = { cpuCount: rec.cpuCount, memoryMB: rec.memoryMB, diskSizeMB: rec.diskSizeMB };
    return this.admission.run({ kind: 'resume', resources }, async () => {
      const local = rec.captureDir !== undefined && d.captures.complete(rec.captureDir);
      if (!local && !rec.pauseId)
        throw new DomainError('internal', `paused sandbox ${rec.sandboxId} has no capture`);
      const opened = local ? undefined : await d.pauses.open(rec.pauseId!);
      try {
        const capture = opened?.capture ?? rec.captureDir!;
        if (rec.pauseKind === 'filesystem')
          return await restoreFilesystem(this.core, capture, rec, resources);
        if (boot === 'reboot') return await this.rebootFrom(capture, rec, resources);
        return await this.restoreInto(capture, rec, resources);
      } finally {
        opened?.release();
      }
    });
  }

  /**
   * A resume that failed (refused for room, or the restore broke) leaves the sandbox paused, and
   * its stored pause to whichever node resumes it first, as after its upload.
   */
  private async letPauseGo(rec: SandboxRecord): Promise<void> {
    const { d } = this.core;
    if (!rec.pauseId || rec.uploadPending) return;
    await d.pauses.release(rec.pauseId).catch((err) => {
      d.logger.warn(
        { err, sandboxId: rec.sandboxId, pauseId: rec.pauseId },
        'pause not released to other nodes',
      );
    });
  }

  /** A sandbox restored from `capture` with the record's resources, in a fresh network slot. */
  private async restoreInto(
    capture: Capture | string,
    rec: SandboxRecord,
    resources: Resources,
  ): Promise<Live> {
    const { d } = this.core;
    const slot = await d.slots.acquire(rec.egress);
    try {
      const handle = await d.driver.restore({ capture, resources, net: slot });
      return { handle, slot };
    } catch (err) {
      await this.core.releaseSlot(slot, rec.sandboxId);
      throw err;
    }
  }

  /**
   * A memory pause booted afresh with its files. gVisor keeps the writable layer inside the
   * checkpoint, so the files are read out of a restored copy, as a filesystem-only pause reads
   * them, and the copy is stopped before the fresh boot. The pause itself is left as it was.
   */
  private async rebootFrom(capture: Capture | string, rec: SandboxRecord, resources: Resources) {
    const { d } = this.core;
    const dir = d.captures.allocate(rec.sandboxId, 'pause');
    try {
      const copy = await this.restoreInto(capture, rec, resources);
      try {
        await captureFilesystem(this.core, rec, copy, dir);
      } finally {
        await d.driver.kill(copy.handle).catch(() => undefined);
        await this.core.releaseSlot(copy.slot, rec.sandboxId);
      }
      return await restoreFilesystem(this.core, dir, rec, resources);
    } finally {
      await d.captures.remove(dir);
    }
  }
}
