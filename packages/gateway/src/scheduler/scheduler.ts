/**
 * What the gateway needs from the scheduler (scheduler.v1). The Connect client implements it;
 * unit tests of the routing logic use a small in-memory one.
 */
export type NodeStatus = 'ready' | 'draining' | 'connecting' | 'unhealthy';

/** A node as the gateway dials it. */
export interface NodeRef {
  nodeId: string;
  /** The node's advertise URL (`AENV_ADVERTISE_URL`). */
  url: string;
  status: NodeStatus;
}

/** What a placement may take into account. */
export interface PlacementHint {
  kind?: 'create' | 'resume' | 'fork_spill';
  templateId?: string;
  snapshotId?: string;
  /** A paused sandbox to resume: the node holding its pause in cache wins. */
  sandboxId?: string;
  pauseId?: string;
  cpuCount?: number;
  /** In the scheduler's unit (scheduler.v1 Resources.memory_mib). */
  memoryMib?: number;
  /** Nodes this placement must not use (they just refused it, or hold the parent of a spill). */
  excludeNodes?: string[];
}

export interface Placement {
  node: NodeRef;
  /** Released by recordAssignment/releaseReservation, or by the scheduler after a timeout. */
  reservationId: string;
  /** The node holds the capture in its runtime cache. */
  localityHit: boolean;
}

/** Where the scheduler last saw a sandbox. */
export interface Binding {
  node: NodeRef;
  /** `running`, `paused`, `lost`, … as the node's roster or the scheduler's events say. */
  state: string;
  /** The newest pause in the shared repository, while paused. */
  pauseId?: string;
  /** Paused, with its newest pause on its node's disk only: no other node can resume it yet. */
  pauseLocalOnly?: boolean;
}

/** One lifecycle event of a sandbox, as the scheduler records and streams them. */
export interface ClusterEvent {
  eventId: string;
  sandboxId: string;
  nodeId: string;
  type: string;
  reason?: string;
  time: string;
  details: Record<string, string>;
}

/** The scheduler cannot be reached or failed: the gateway answers 503. */
export class SchedulerUnavailable extends Error {
  override name = 'SchedulerUnavailable';
}

/** No node can take the placement now: 429 + Retry-After (full) or 503 (no healthy node). */
export class PlacementRefused extends Error {
  override name = 'PlacementRefused';
  constructor(
    readonly reason: 'cluster_full' | 'no_healthy_node',
    message: string,
    readonly retryAfterSecs: number,
  ) {
    super(message);
  }
}

export interface Scheduler {
  schedule(hint: PlacementHint): Promise<Placement>;
  lookupNode(sandboxId: string): Promise<Binding | undefined>;
  recordAssignment(sandboxId: string, nodeId: string, reservationId?: string): Promise<void>;
  releaseReservation(reservationId: string): Promise<void>;
  /** A pause `nodeId` answered; `stored` when the shared repository holds it already. */
  recordPause(sandboxId: string, nodeId: string, stored: boolean): Promise<void>;
  /** A snapshot now in `nodeId`'s runtime cache, so creates from it are placed there at once. */
  recordSnapshot(nodeId: string, snapshotId: string, names: readonly string[]): Promise<void>;
  /** Every known node, for fan-out and GET /nodes, each as the scheduler reports it (JSON). */
  listNodes(): Promise<{ ref: NodeRef; info: Record<string, unknown> }[]>;
  getNode(nodeId: string): Promise<{ ref: NodeRef; info: Record<string, unknown> } | undefined>;
  sandboxEvents(sandboxId: string): Promise<ClusterEvent[]>;
  /** Lifecycle events as they happen, until `signal` aborts. */
  watchEvents(signal: AbortSignal, sandboxId?: string): AsyncIterable<ClusterEvent>;
}
