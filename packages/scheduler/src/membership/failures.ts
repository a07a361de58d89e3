import type { Clock } from '../clock.js';
import type { EventLog } from '../events.js';
import { nodeFailureReason, unstoredPauseReason } from './health.js';
import type { Membership } from './membership.js';
import type { Candidate } from '../schedule/scoring/candidate.js';
import type { Binding } from '../model.js';
import type { SchedulerSettings } from '../settings.js';
import type { SchedulerStore } from '../store/store.js';

export interface FailureReport {
  nodeId: string;
  lost: string[];
  paused: string[];
}

/** Paused with its newest pause on its node's disk only: only that node can bring it back. */
export const pausedLocally = (b: Binding) => b.state === 'paused' && b.pauseLocalOnly === true;

/**
 * Acts on nodes that went silent: their running sandboxes (and any caught mid-operation) become
 * `lost` with a node-failure event; their paused sandboxes stay bound, for longer, so they can be
 * resumed elsewhere from the shared repository, or, when the pause is on the node's disk only, by
 * the node once it is back. A node silent for `nodeGoneAfterMs` is gone for good: those pauses
 * are lost then. Each silence is handled once at each stage, across replicas.
 */
export class FailureDetector {
  constructor(
    private readonly store: SchedulerStore,
    private readonly clock: Clock,
    private readonly settings: SchedulerSettings,
    private readonly membership: Membership,
    private readonly events: EventLog,
  ) {}

  async sweep(): Promise<FailureReport[]> {
    const reports: FailureReport[] = [];
    const { index } = this.membership;
    await index.ready();
    const at = this.clock.now();
    for (const v of index.candidates((n, drained) => this.membership.statusOf(n, drained, at))) {
      const last = v.node.lastHeartbeatMs;
      if (v.status !== 'unhealthy' || last === undefined) continue;
      const report = await this.failed(v, last);
      const gone = await this.gone(v, last);
      if (report || gone.length) {
        reports.push({
          nodeId: v.node.nodeId,
          lost: [...(report?.lost ?? []), ...gone],
          paused: (report?.paused ?? []).filter((id) => !gone.includes(id)),
        });
      }
    }
    return reports;
  }

  /** The first sweep after the node went silent. */
  private async failed(v: Candidate, last: number): Promise<FailureReport | undefined> {
    if (!(await this.store.claimOnce(`failure:${v.node.nodeId}:${last}`, this.settings.lostRetentionMs)))
      return undefined;
    const now = this.clock.now();
    const bindings = await this.store.nodeBindings(v.node.nodeId);
    const lost = bindings.filter((b) => b.state !== 'paused' && b.state !== 'lost');
    const paused = bindings.filter((b) => b.state === 'paused');
    await this.markLost(lost, nodeFailureReason(v.node, now));
    await this.store.putBindings(
      paused.map((b) => ({ ...b, updatedMs: now })),
      this.settings.pausedRetentionMs,
    );
    return {
      nodeId: v.node.nodeId,
      lost: lost.map((b) => b.sandboxId),
      paused: paused.map((b) => b.sandboxId),
    };
  }

  /** Once the node is gone for good: the pauses only it held are lost. */
  private async gone(v: Candidate, last: number): Promise<string[]> {
    const now = this.clock.now();
    if (now - last < this.settings.nodeGoneAfterMs) return [];
    if (!(await this.store.claimOnce(`gone:${v.node.nodeId}:${last}`, this.settings.lostRetentionMs)))
      return [];
    const local = (await this.store.nodeBindings(v.node.nodeId)).filter(pausedLocally);
    await this.markLost(local, unstoredPauseReason(v.node, now));
    return local.map((b) => b.sandboxId);
  }

  private async markLost(bindings: readonly Binding[], reason: string): Promise<void> {
    const now = this.clock.now();
    const asLost = (b: Binding): Binding => ({ ...b, state: 'lost', lostReason: reason, updatedMs: now });
    await this.store.putBindings(bindings.map(asLost), this.settings.lostRetentionMs);
    for (const b of bindings) {
      await this.events.record({
        sandboxId: b.sandboxId,
        nodeId: b.nodeId,
        type: 'lost',
        reason,
        details: { previous_state: b.state },
      });
    }
  }
}
