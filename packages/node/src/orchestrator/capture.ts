import { withContext } from '@agentenv/common';
import type { Capture } from '../runtime/index.js';
import type { SandboxCore } from './core.js';
import { filesSince, type SandboxRecord } from './record.js';
import type { CaptureKind, SnapshotInfo, TakenSnapshot } from './seams.js';

/** The lifecycle stage of a snapshot's store, ended once the shared repository holds it. */
export const SNAPSHOT_STORE_STAGE = 'snapshot-store';

/**
 * Snapshots of running sandboxes that leave them running: the source is held only for the
 * checkpoint, and the answer comes once this node can start from the snapshot; storing it in the
 * shared repository runs on in the background. Forks capture the same way (fork.ts).
 */
export class Capturer {
  constructor(private readonly core: SandboxCore) {}

  /**
   * Captures a running sandbox as a snapshot; the sandbox is paused only while its memory and
   * filesystem are captured, then runs on with its id and end time unchanged. `untilStored`: the
   * answer waits for the repository, and a failure there fails it (the snapshot is then gone).
   */
  async snapshot(id: string, name: string | undefined, untilStored: boolean): Promise<SnapshotInfo> {
    const { source, capture } = await captureRunning(this.core, id, 'snapshot');
    let taken: TakenSnapshot;
    try {
      taken = await this.core.d.snapshots.take(
        capture.dir,
        {
          names: name ? [name] : [],
          sourceSandboxId: id,
          templateId: source.templateId,
          cpuCount: source.cpuCount,
          memoryMB: source.memoryMB,
          diskSizeMB: source.diskSizeMB,
          envdVersion: source.envdVersion,
          filesSince: filesSince(source),
        },
        source.envdAccessToken,
      );
    } catch (err) {
      this.core.failed('snapshot', id, err);
      throw withContext(err, 'keeping the snapshot failed');
    } finally {
      await this.core.d.captures.remove(capture.dir);
    }
    const { snapshotID } = taken.info;
    this.core.logs.add(id, `snapshot ${snapshotID} taken`);
    this.core.emit('snapshot', id, 'request', { snapshot_id: snapshotID });
    this.track(id, taken);
    if (!untilStored) return taken.info;
    try {
      await taken.stored;
    } catch (err) {
      await this.core.d.snapshots.delete(snapshotID).catch(() => undefined);
      throw withContext(err, 'storing the snapshot failed');
    }
    return { ...taken.info, stored: true };
  }

  /** After a restart: the snapshots a previous process took and did not store are stored now. */
  storeLeftovers(): void {
    for (const taken of this.core.d.snapshots.storeLeftovers()) this.track(undefined, taken);
  }

  /** A snapshot's store as background work (shutdown waits for it), timed as a lifecycle stage. */
  private track(sandboxId: string | undefined, taken: TakenSnapshot): void {
    const t0 = this.core.clock.now();
    void this.core.background.run(SNAPSHOT_STORE_STAGE, sandboxId, async () => {
      try {
        await taken.stored;
        this.core.d.observer.stage(SNAPSHOT_STORE_STAGE, this.core.clock.now() - t0);
      } catch (err) {
        this.core.d.observer.failed(SNAPSHOT_STORE_STAGE);
        throw withContext(err, `storing snapshot ${taken.info.snapshotID} in the repository failed`);
      }
    });
  }
}

/** Checkpoints a running sandbox into a fresh directory, leaving it running. */
export async function captureRunning(
  core: SandboxCore,
  id: string,
  kind: CaptureKind,
): Promise<{ source: SandboxRecord; capture: Capture }> {
  let taken: { source: SandboxRecord; capture: Capture } | undefined;
  const op = kind === 'fork' ? 'fork' : 'snapshot';
  await core.transition(id, op, async (rec) => {
    const live = core.mustLive(id);
    const dir = core.d.captures.allocate(id, kind);
    await core.drainConnections(id, op);
    taken = {
      source: rec,
      capture: await core.d.driver.checkpoint(live.handle, { dir, leaveRunning: true }),
    };
    return { ...rec, state: 'running' };
  });
  return taken!;
}
