import type { NodeRecord, NodeStatus } from './model.js';

/** Heartbeat intervals a node may miss before it is unhealthy. */
export const MISSED_INTERVALS = 3;

/**
 * A node's status now. Silence beats everything (a draining node that stopped is unhealthy, so
 * its running sandboxes are reported lost); a drain holds for the boot it was made for, so a
 * node that restarts comes back ready.
 */
export function nodeStatus(
  node: NodeRecord,
  drainedBootId: string | undefined,
  now: number,
  intervalMs: number,
): NodeStatus {
  if (node.lastHeartbeatMs === undefined) return 'connecting';
  if (now - node.lastHeartbeatMs > MISSED_INTERVALS * intervalMs) return 'unhealthy';
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
