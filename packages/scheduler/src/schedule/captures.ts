import { captureKey } from '@agentenv/protocol/scheduler';
import type { AnnouncedCapture, NodeRecord } from '../model.js';

/**
 * Captures a node holds before its heartbeats can list them. A snapshot enters its node's
 * runtime cache as it is taken, but the node advertises it only with a later heartbeat (gathered
 * after the snapshot, then sent): a create of the snapshot that comes first would be placed
 * without locality, and the node it lands on would then hold the snapshot too. The gateway
 * reports the snapshot before it answers the client, so placement counts it on its node from
 * then on; the node's own report takes over with the first heartbeat that lists it.
 */

/** The keys a snapshot is looked for under (`startCacheKeys` of a create naming it). */
export function snapshotKeys(snapshotId: string, names: readonly string[]): string[] {
  return [...new Set([snapshotId, ...names])].map(captureKey.snapshot);
}

/** The node as placement sees it: its reported cache keys and those announced for it. */
export function withAnnounced(node: NodeRecord, announced: readonly AnnouncedCapture[]): NodeRecord {
  const extra = announced.filter((a) => a.nodeId === node.nodeId).map((a) => a.key);
  if (extra.length === 0) return node;
  return { ...node, cacheKeys: [...new Set([...node.cacheKeys, ...extra])] };
}

/**
 * The announcements a node's heartbeat confirms (it lists their keys): from then on its
 * heartbeats say whether it still holds them. One gathered before the capture was taken lists
 * none, and leaves them standing.
 */
export function confirmed(
  nodeId: string,
  cacheKeys: readonly string[],
  announced: readonly AnnouncedCapture[],
): AnnouncedCapture[] {
  const listed = new Set(cacheKeys);
  return announced.filter((a) => a.nodeId === nodeId && listed.has(a.key));
}
