import { withContext } from '@agentenv/common';
import type { Capture } from '../runtime/index.js';
import type { SandboxCore } from './core.js';
import { filesSince, type SandboxRecord } from './record.js';
import type { CaptureKind, SnapshotInfo } from './seams.js';

/**
 * Snapshots of running sandboxes (stored in the catalogue) that leave them running: the source
 * is held only for the checkpoint. Forks capture the same way (fork.ts).
 */
export class Capturer {
  constructor(private readonly core: SandboxCore) {}

  /**
   * Captures a running sandbox as a snapshot; the sandbox is paused only while its memory and
   * filesystem are captured, then runs on with its id and end time unchanged.
   */
  async snapshot(id: string, name?: string): Promise<SnapshotInfo> {
    const { source, capture } = await captureRunning(this.core, id, 'snapshot');
    // Stored after the sandbox is running again: its users (and the proxy, which waits while a
    // sandbox is in a transient state) wait for the checkpoint only, not for the upload.
    try {
      const info = await this.core.d.snapshots.save(
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
      this.core.logs.add(id, `snapshot ${info.snapshotID} taken`);
      this.core.emit('snapshot', id, 'request', { snapshot_id: info.snapshotID });
      return info;
    } catch (err) {
      this.core.failed('snapshot', id, err);
      throw withContext(err, 'storing the snapshot failed');
    } finally {
      await this.core.d.captures.remove(capture.dir);
    }
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
