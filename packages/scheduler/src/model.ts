/**
 * The scheduler's own records: plain JSON values, so every store keeps them as they are and the
 * placement code never sees protobuf messages. `rpc/convert.ts` translates at the edge.
 */

/** What placement and lookups see of a node; `unhealthy` and `connecting` come from health.ts. */
export type NodeStatus = 'ready' | 'draining' | 'unhealthy' | 'connecting';

export type SandboxState =
  | 'creating'
  | 'running'
  | 'pausing'
  | 'paused'
  | 'resuming'
  | 'snapshotting'
  | 'forking'
  | 'killing'
  | 'lost';

export type PlacementKind = 'create' | 'resume' | 'fork-spill';

export type SandboxEventType =
  'created' | 'paused' | 'resumed' | 'killed' | 'exited' | 'forked' | 'snapshot' | 'lost';

export interface Resources {
  cpuCount: number;
  memoryMib: number;
}

export interface NodeCapacity {
  cpuCount: number;
  memoryTotalMib: number;
  maxSandboxes: number;
  maxConcurrentStarts: number;
}

export interface NodeLoad {
  allocatedCpu: number;
  allocatedMemoryMib: number;
  memoryUsedMib: number;
  memoryFreeMib: number;
  startsInFlight: number;
  runningCount: number;
  pausedCount: number;
  cpuLoad1m: number;
}

export interface P2pEndpoint {
  endpointId: string;
  addresses: string[];
}

/** One sandbox of a node's roster. */
export interface RosterEntry {
  sandboxId: string;
  state: SandboxState;
  templateId: string;
  pauseId?: string;
  cpuCount: number;
  memoryMib: number;
  /** Paused, with its newest pause on the node's disk only: nobody else can resume it yet. */
  pauseLocalOnly?: true;
}

export interface NodeRecord {
  nodeId: string;
  advertiseUrl: string;
  version: string;
  clusterId: string;
  /** Changes when the node process restarts. */
  bootId: string;
  /** What the node itself said in its last heartbeat. */
  reported: 'ready' | 'draining';
  capacity: NodeCapacity;
  load: NodeLoad;
  cacheKeys: string[];
  /** Digest of the chunk keys the node advertised (the keys themselves are stored apart). */
  chunkDigest: string;
  p2p?: P2pEndpoint;
  /** Absent until the first heartbeat of an expected node. */
  lastHeartbeatMs?: number;
}

/** Where a sandbox lives. Written by assignments and by rosters; expires without refresh. */
export interface Binding {
  sandboxId: string;
  nodeId: string;
  state: SandboxState;
  templateId: string;
  pauseId?: string;
  cpuCount: number;
  memoryMib: number;
  /** As in RosterEntry. */
  pauseLocalOnly?: true;
  source: 'assignment' | 'roster';
  updatedMs: number;
  /** Why the sandbox is lost, when it is. */
  lostReason?: string;
}

/** Room held on a node for a start under way, until assigned, released or expired. */
export interface Reservation {
  id: string;
  nodeId: string;
  /** Per sandbox; `count` sandboxes are reserved. */
  resources: Resources;
  count: number;
  createdMs: number;
  expiresMs: number;
  /**
   * Set once assigned: the sandboxes started under it. Until the node's roster lists them its
   * reported load does not count them, so the reservation holds their room a little longer.
   */
  sandboxIds?: string[];
}

/**
 * A capture a node holds that its heartbeats do not list yet (a snapshot it just took, reported by
 * the gateway): placement counts it as in the node's cache until a heartbeat lists it or it expires.
 */
export interface AnnouncedCapture {
  nodeId: string;
  /** As `captureKey` builds it. */
  key: string;
  expiresMs: number;
}

export interface SandboxEvent {
  eventId: string;
  sandboxId: string;
  nodeId: string;
  type: SandboxEventType;
  reason: string;
  timeMs: number;
  details: Record<string, string>;
}

/** Reserved totals on one node. */
export interface Reserved {
  count: number;
  cpu: number;
  memoryMib: number;
}

export const NO_RESERVATION: Reserved = Object.freeze({ count: 0, cpu: 0, memoryMib: 0 });

/** Sums live reservations per node. */
export function reservedByNode(reservations: readonly Reservation[]): Map<string, Reserved> {
  const out = new Map<string, Reserved>();
  for (const r of reservations) {
    const cur = out.get(r.nodeId) ?? { ...NO_RESERVATION };
    cur.count += r.count;
    cur.cpu += r.resources.cpuCount * r.count;
    cur.memoryMib += r.resources.memoryMib * r.count;
    out.set(r.nodeId, cur);
  }
  return out;
}
