import type { Clock } from '../clock.js';
import type { EventLog } from '../events.js';
import { nodeFailureReason } from './health.js';
import type { Membership } from './membership.js';
import type { Binding } from '../model.js';
import type { SchedulerSettings } from '../settings.js';
import type { SchedulerStore } from '../store/store.js';

export interface FailureReport {
  nodeId: string;
  lost: string[];
  paused: string[];
}

/**
 * Acts on nodes that went silent: their running sandboxes (and any caught mid-operation) become
 * `lost` with a node-failure event; their paused sandboxes stay bound, for longer, so they can be
 * resumed elsewhere from the shared repository. Each silence is handled once, across replicas.
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
      if (!(await this.store.claimOnce(`failure:${v.node.nodeId}:${last}`, this.settings.lostRetentionMs)))
        continue;
      const now = this.clock.now();
      const reason = nodeFailureReason(v.node, now);
      const bindings = await this.store.nodeBindings(v.node.nodeId);
      const lost = bindings.filter((b) => b.state !== 'paused' && b.state !== 'lost');
      const paused = bindings.filter((b) => b.state === 'paused');
      const asLost = (b: Binding): Binding => ({ ...b, state: 'lost', lostReason: reason, updatedMs: now });
      await this.store.putBindings(lost.map(asLost), this.settings.lostRetentionMs);
      await this.store.putBindings(
        paused.map((b) => ({ ...b, updatedMs: now })),
        this.settings.pausedRetentionMs,
      );
      for (const b of lost) {
        await this.events.record({
          sandboxId: b.sandboxId,
          nodeId: b.nodeId,
          type: 'lost',
          reason,
          details: { previous_state: b.state },
        });
      }
      reports.push({
        nodeId: v.node.nodeId,
        lost: lost.map((b) => b.sandboxId),
        paused: paused.map((b) => b.sandboxId),
      });
    }
    return reports;
  }
}
