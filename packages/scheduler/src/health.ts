import type { Clock } from './clock.js';
import type { NodeRecord, NodeStatus } from './model.js';

/** Heartbeat intervals a node may miss before it is unhealthy. */
export const MISSED_INTERVALS = 3;

/**
 * A node's status now. Silence beats everything (a draining node that stopped is unhealthy, so
 * its running sandboxes are reported lost); a drain holds for the boot it was made for, so a
 * node that restarts comes back ready. Silence counts from the later of the node's last
 * heartbeat and `watchingSinceMs`, the start of this scheduler's unbroken watch (see Watch).
 */
export function nodeStatus(
  node: NodeRecord,
  drainedBootId: string | undefined,
  now: number,
  intervalMs: number,
  watchingSinceMs = 0,
): NodeStatus {
  if (node.lastHeartbeatMs === undefined) return 'connecting';
  const heard = Math.max(node.lastHeartbeatMs, watchingSinceMs);
  if (now - heard > MISSED_INTERVALS * intervalMs) return 'unhealthy';
  if (node.reported === 'draining' || drainedBootId === node.bootId) return 'draining';
  return 'ready';
}

/** The reason recorded on sandboxes of a node that went silent. */
export function nodeFailureReason(node: NodeRecord, now: number): string {
  const age =
    node.lastHeartbeatMs === undefined
      ? 'never'
      : `${((now - node.lastHeartbeatMs) / 1000).toFixed(1)} s ago`;
  return `node failure: node ${node.nodeId} stopped heartbeating (last heartbeat ${age})`;
}

/**
 * Since when this scheduler has watched the nodes without a gap. Heartbeats missed while the
 * scheduler itself was not running (restarted on a shared store) or was stalled (a starved
 * process, its sockets holding the heartbeats unread) say nothing of the nodes, so a gap longer
 * than `maxGapMs` between ticks starts the watch again. Ticked by a timer, and by every reading,
 * so a judgement made first thing after a stall (a placement, a sweep) already sees the gap.
 */
export class Watch {
  private lastMs: number;
  private sinceMs: number;

  constructor(
    private readonly clock: Clock,
    private readonly maxGapMs: number,
  ) {
    this.lastMs = this.sinceMs = clock.now();
  }

  tick(): void {
    const now = this.clock.now();
    if (now - this.lastMs > this.maxGapMs) this.sinceMs = now;
    this.lastMs = now;
  }

  get since(): number {
    this.tick();
    return this.sinceMs;
  }
}
