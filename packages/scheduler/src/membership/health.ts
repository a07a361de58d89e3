import type { Clock } from '../clock.js';
import type { NodeRecord, NodeStatus } from '../model.js';

/** Heartbeat intervals a node may miss before it is unhealthy. */
export const MISSED_INTERVALS = 3;

/**
 * A node's status now. Silence beats everything (a draining node that stopped is unhealthy, so
 * its running sandboxes are reported lost); a drain holds for the boot it was made for, so a
 * node that restarts comes back ready. Silence counts from the later of the node's last
 * heartbeat and `watchingSinceMs`, the start of this scheduler's unbroken watch, less the time
 * this scheduler itself stalled since then (`stalledSince`; see Watch).
 */
export function nodeStatus(
  node: NodeRecord,
  drainedBootId: string | undefined,
  now: number,
  intervalMs: number,
  watchingSinceMs = 0,
  stalledSince: (ms: number) => number = () => 0,
): NodeStatus {
  if (node.lastHeartbeatMs === undefined) return 'connecting';
  const heard = Math.max(node.lastHeartbeatMs, watchingSinceMs);
  if (now - heard - stalledSince(heard) > MISSED_INTERVALS * intervalMs) return 'unhealthy';
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
 * The reason recorded on a sandbox whose pause its node had not stored in the shared repository
 * when the node went silent, once the node is deemed gone for good.
 */
export function unstoredPauseReason(node: NodeRecord, now: number): string {
  return (
    `${nodeFailureReason(node, now)} before its pause was stored in the shared repository; ` +
    'the pause was only on that node, now deemed gone for good'
  );
}

/** How far back stalls are remembered: far longer than any silence a live node shows. */
const STALL_MEMORY_INTERVALS = 30;

/**
 * Since when this scheduler has watched the nodes without a gap, and how long it stalled within
 * that watch. Heartbeats missed while the scheduler itself was not running (restarted on a shared
 * store) or was stalled (a starved process, its sockets holding the heartbeats unread) say nothing
 * of the nodes: a gap longer than `maxGapMs` between ticks starts the watch again, and shorter
 * ones (a process starved a second at a time on a loaded machine, each too short to start the
 * watch again but adding up over three intervals) are summed, so the silence a node is judged by
 * leaves them out. Ticked by a timer every `tickMs`, and by every reading, so a judgement made
 * first thing after a stall (a placement, a sweep) already sees it.
 */
export class Watch {
  private lastMs: number;
  private sinceMs: number;
  /** Stalls within the watch: when each ended and how long it was, oldest first. */
  private readonly stalls: { atMs: number; ms: number }[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly maxGapMs: number,
    private readonly tickMs = maxGapMs / 4,
  ) {
    this.lastMs = this.sinceMs = clock.now();
  }

  tick(): void {
    const now = this.clock.now();
    const gap = now - this.lastMs;
    if (gap > this.maxGapMs) {
      this.sinceMs = now;
      this.stalls.length = 0;
    } else if (gap > this.tickMs) this.stalls.push({ atMs: now, ms: gap - this.tickMs });
    this.lastMs = now;
    const forget = now - STALL_MEMORY_INTERVALS * this.maxGapMs;
    while (this.stalls.length && this.stalls[0]!.atMs < forget) this.stalls.shift();
  }

  get since(): number {
    this.tick();
    return this.sinceMs;
  }

  /** How long this process stalled after `ms` (within the watch). */
  stalledSince(ms: number): number {
    this.tick();
    let total = 0;
    for (const s of this.stalls) if (s.atMs > ms) total += Math.min(s.ms, s.atMs - ms);
    return total;
  }
}
