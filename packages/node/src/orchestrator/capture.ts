import { DomainError, invalid, withContext } from '@agentenv/common';
import type { Capture } from '../runtime/index.js';
import type { SandboxCore } from './core.js';
import type { CreateSandboxInput, Creator } from './create.js';
import { forkChildSettings } from './fork-settings.js';
import { filesSince, type SandboxRecord } from './record.js';
import type { CaptureKind, SandboxSource, SnapshotInfo } from './seams.js';

/** One child of a fork: the sandbox, or why it did not start. */
export type ForkResult = { sandbox: SandboxRecord } | { error: DomainError };

/**
 * Captures of running sandboxes that leave them running: snapshots (stored in the catalogue) and
 * forks (children restored from one capture). The source is held only for the checkpoint.
 */
export class Capturer {
  constructor(
    private readonly core: SandboxCore,
    private readonly creator: Creator,
  ) {}

  /**
   * Captures a running sandbox as a snapshot; the sandbox is paused only while its memory and
   * filesystem are captured, then runs on with its id and end time unchanged.
   */
  async snapshot(id: string, name?: string): Promise<SnapshotInfo> {
    const { source, capture } = await this.captureRunning(id, 'snapshot');
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

  /**
   * Forks a running sandbox into `count` independent children started in parallel from one
   * capture. The parent is paused only for the capture. One result per child: a failed child
   * affects neither the others nor the parent.
   */
  async fork(id: string, count: number, timeoutSecs: number | undefined): Promise<ForkResult[]> {
    const max = this.core.d.config.fork.maxChildren;
    if (!Number.isInteger(count) || count < 1 || count > max)
      throw invalid(`count must be between 1 and ${max}`);
    const { source: parent, capture } = await this.captureRunning(id, 'fork');
    try {
      const source: SandboxSource = { kind: 'fork', capture, parent };
      const template = await this.core.d.sources.resolve(source);
      const input: CreateSandboxInput = {
        source,
        ...forkChildSettings(parent, timeoutSecs, this.core.clock.now()),
      };
      const results = await Promise.allSettled(
        Array.from({ length: count }, () => this.creator.child(template, input, id)),
      );
      const started = results.filter((r) => r.status === 'fulfilled').length;
      this.core.logs.add(id, `forked into ${started} of ${count} children`);
      this.core.emit('forked', id, 'request', { child_count: String(started) });
      return results.map((r) => {
        if (r.status === 'fulfilled') return { sandbox: r.value };
        const e =
          r.reason instanceof DomainError ? r.reason : withContext(r.reason, 'the child failed to start');
        return { error: e };
      });
    } finally {
      await this.core.d.captures.remove(capture.dir);
    }
  }

  /** Checkpoints a running sandbox into a fresh directory, leaving it running. */
  private async captureRunning(
    id: string,
    kind: CaptureKind,
  ): Promise<{ source: SandboxRecord; capture: Capture }> {
    let taken: { source: SandboxRecord; capture: Capture } | undefined;
    await this.core.transition(id, kind === 'fork' ? 'fork' : 'snapshot', async (rec) => {
      const live = this.core.mustLive(id);
      const dir = this.core.d.captures.allocate(id, kind);
      await this.core.drainConnections(id);
      taken = {
        source: rec,
        capture: await this.core.d.driver.checkpoint(live.handle, { dir, leaveRunning: true }),
      };
      return { ...rec, state: 'running' };
    });
    return taken!;
  }
}
