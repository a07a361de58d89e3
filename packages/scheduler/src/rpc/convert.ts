import { create } from '@bufbuild/protobuf';
import { timestampFromMs, timestampMs } from '@bufbuild/protobuf/wkt';
import * as pb from '@agentenv/protocol/scheduler';
import { invalid } from '@agentenv/common';
import type { EventInput } from '../events.js';
import type { HeartbeatInput, NodeView } from '../membership/membership.js';
import type * as m from '../model.js';
import type { Located, Placed, ScheduleInput } from '../schedule/reservations.js';

/** Protobuf ⇄ the scheduler's records. Enum tables are total: adding a value is a type error here. */
const NODE_STATUS: Record<m.NodeStatus, pb.NodeStatus> = {
  ready: pb.NodeStatus.READY,
  draining: pb.NodeStatus.DRAINING,
  unhealthy: pb.NodeStatus.UNHEALTHY,
  connecting: pb.NodeStatus.CONNECTING,
};

export const SANDBOX_STATE: Record<m.SandboxState, pb.SandboxState> = {
  creating: pb.SandboxState.CREATING,
  running: pb.SandboxState.RUNNING,
  pausing: pb.SandboxState.PAUSING,
  paused: pb.SandboxState.PAUSED,
  resuming: pb.SandboxState.RESUMING,
  snapshotting: pb.SandboxState.SNAPSHOTTING,
  forking: pb.SandboxState.FORKING,
  killing: pb.SandboxState.KILLING,
  lost: pb.SandboxState.LOST,
};

const PLACEMENT_KIND: Record<m.PlacementKind, pb.PlacementKind> = {
  create: pb.PlacementKind.CREATE,
  resume: pb.PlacementKind.RESUME,
  'fork-spill': pb.PlacementKind.FORK_SPILL,
};

export const EVENT_TYPE: Record<m.SandboxEventType, pb.SandboxEventType> = {
  created: pb.SandboxEventType.CREATED,
  paused: pb.SandboxEventType.PAUSED,
  resumed: pb.SandboxEventType.RESUMED,
  killed: pb.SandboxEventType.KILLED,
  exited: pb.SandboxEventType.EXITED,
  forked: pb.SandboxEventType.FORKED,
  snapshot: pb.SandboxEventType.SNAPSHOT,
  lost: pb.SandboxEventType.LOST,
};

function reverse<K extends string, V>(table: Record<K, V>): Map<V, K> {
  return new Map(Object.entries(table).map(([k, v]) => [v as V, k as K]));
}
const NODE_STATUS_OF = reverse(NODE_STATUS);
const SANDBOX_STATE_OF = reverse(SANDBOX_STATE);
const PLACEMENT_KIND_OF = reverse(PLACEMENT_KIND);
const EVENT_TYPE_OF = reverse(EVENT_TYPE);

function known<K>(table: Map<number, K>, value: number, field: string): K {
  const k = table.get(value);
  if (k === undefined) throw invalid(`invalid ${field}: ${value}`);
  return k;
}

// ---- requests ----

export function heartbeatIn(r: pb.HeartbeatRequest): HeartbeatInput {
  const status = r.status === pb.NodeStatus.UNSPECIFIED ? 'ready' : known(NODE_STATUS_OF, r.status, 'status');
  if (status !== 'ready' && status !== 'draining')
    throw invalid('invalid status: a node reports READY or DRAINING');
  const c = r.capacity;
  const l = r.load;
  return {
    nodeId: r.nodeId,
    advertiseUrl: r.advertiseUrl,
    version: r.version,
    clusterId: r.clusterId,
    bootId: r.bootId,
    status,
    capacity: {
      cpuCount: c?.cpuCount ?? 0,
      memoryTotalMib: c?.memoryTotalMib ?? 0,
      maxSandboxes: c?.maxSandboxes ?? 0,
      maxConcurrentStarts: c?.maxConcurrentStarts ?? 0,
    },
    load: {
      allocatedCpu: l?.allocatedCpu ?? 0,
      allocatedMemoryMib: l?.allocatedMemoryMib ?? 0,
      memoryUsedMib: l?.memoryUsedMib ?? 0,
      memoryFreeMib: l?.memoryFreeMib ?? 0,
      startsInFlight: l?.startsInFlight ?? 0,
      runningCount: l?.runningCount ?? 0,
      pausedCount: l?.pausedCount ?? 0,
      cpuLoad1m: l?.cpuLoad1m ?? 0,
    },
    roster: r.sandboxes.map(rosterIn),
    cacheKeys: r.cacheKeys,
    chunkKeys: r.chunkKeys,
    ...(r.p2p ? { p2p: { endpointId: r.p2p.endpointId, addresses: r.p2p.addresses } } : {}),
  };
}

function rosterIn(s: pb.SandboxSummary): m.RosterEntry {
  return {
    sandboxId: s.sandboxId,
    state: known(SANDBOX_STATE_OF, s.state, `state of sandbox ${s.sandboxId}`),
    templateId: s.templateId,
    ...(s.pauseId ? { pauseId: s.pauseId } : {}),
    cpuCount: s.cpuCount,
    memoryMib: s.memoryMib,
    ...(s.pauseLocalOnly ? { pauseLocalOnly: true as const } : {}),
  };
}

export function scheduleIn(r: pb.ScheduleRequest): ScheduleInput {
  return {
    kind: r.kind === pb.PlacementKind.UNSPECIFIED ? 'create' : known(PLACEMENT_KIND_OF, r.kind, 'kind'),
    ...(r.templateId ? { templateId: r.templateId } : {}),
    ...(r.snapshotId ? { snapshotId: r.snapshotId } : {}),
    ...(r.pauseId ? { pauseId: r.pauseId } : {}),
    cacheKeys: r.cacheKeys,
    ...(r.resources
      ? { resources: { cpuCount: r.resources.cpuCount, memoryMib: r.resources.memoryMib } }
      : {}),
    ...(r.sandboxId ? { sandboxId: r.sandboxId } : {}),
    ...(r.preferNodeId ? { preferNodeId: r.preferNodeId } : {}),
    excludeNodeIds: r.excludeNodeIds,
    count: r.count,
  };
}

export function eventIn(e: pb.SandboxEvent): EventInput {
  return {
    ...(e.eventId ? { eventId: e.eventId } : {}),
    sandboxId: e.sandboxId,
    nodeId: e.nodeId,
    type: known(EVENT_TYPE_OF, e.type, 'event type'),
    reason: e.reason,
    ...(e.time ? { timeMs: timestampMs(e.time) } : {}),
    details: { ...e.details },
  };
}

// ---- responses ----

export function scheduleOut(p: Placed): pb.ScheduleResponse {
  return create(pb.ScheduleResponseSchema, {
    node: { nodeId: p.nodeId, advertiseUrl: p.advertiseUrl },
    reservationId: p.reservationId,
    reservationExpiresAt: timestampFromMs(p.expiresMs),
    localityHit: p.localityHit,
  });
}

export function lookupOut(l: Located): pb.LookupNodeResponse {
  return create(pb.LookupNodeResponseSchema, {
    node: { nodeId: l.nodeId, advertiseUrl: l.advertiseUrl },
    nodeStatus: NODE_STATUS[l.nodeStatus],
    sandbox: summaryOut(l.binding),
  });
}

function summaryOut(s: m.RosterEntry): pb.SandboxSummary {
  return create(pb.SandboxSummarySchema, {
    sandboxId: s.sandboxId,
    state: SANDBOX_STATE[s.state],
    templateId: s.templateId,
    pauseId: s.pauseId ?? '',
    cpuCount: s.cpuCount,
    memoryMib: s.memoryMib,
    pauseLocalOnly: s.pauseLocalOnly === true,
  });
}

export const nodeStatusOut = (s: m.NodeStatus): pb.NodeStatus => NODE_STATUS[s];

export function nodeOut(v: NodeView, roster?: readonly m.RosterEntry[]): pb.Node {
  const n = v.node;
  return create(pb.NodeSchema, {
    ref: { nodeId: n.nodeId, advertiseUrl: n.advertiseUrl },
    status: NODE_STATUS[v.status],
    version: n.version,
    clusterId: n.clusterId,
    capacity: n.capacity,
    load: n.load,
    ...(n.lastHeartbeatMs !== undefined ? { lastHeartbeat: timestampFromMs(n.lastHeartbeatMs) } : {}),
    reservedCount: v.reserved.count,
    reserved: { cpuCount: v.reserved.cpu, memoryMib: v.reserved.memoryMib },
    cacheKeyCount: n.cacheKeys.length,
    ...(n.p2p ? { p2p: n.p2p } : {}),
    expected: v.expected,
    sandboxes: (roster ?? []).map(summaryOut),
  });
}

export function eventOut(e: m.SandboxEvent): pb.SandboxEvent {
  return create(pb.SandboxEventSchema, {
    eventId: e.eventId,
    sandboxId: e.sandboxId,
    nodeId: e.nodeId,
    type: EVENT_TYPE[e.type],
    reason: e.reason,
    time: timestampFromMs(e.timeMs),
    details: e.details,
  });
}
