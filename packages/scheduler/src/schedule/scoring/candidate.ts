import type { NodeRecord, NodeStatus, Reserved, Resources } from '../../model.js';

/** A node as placement sees it: its last report, its health now, and what is reserved on it. */
export interface Candidate {
  node: NodeRecord;
  status: NodeStatus;
  reserved: Reserved;
}

/** What one placement asks for. */
export interface PlacementRequest {
  /** Per sandbox. */
  resources: Resources;
  /** Sandboxes to place together on one node. */
  count: number;
  cacheKeys: readonly string[];
  preferNodeId?: string;
  excludeNodeIds: readonly string[];
}
