import type { MessageInitShape } from '@bufbuild/protobuf';
import { NodeStatus, SandboxState, type HeartbeatRequestSchema } from '@agentenv/protocol/scheduler';
import { pauseStored } from '../orchestrator/index.js';

/** What a heartbeat needs of a sandbox record. */
export interface RosterSource {
  sandboxId: string;
  state: string;
  templateId: string;
  pauseId?: string;
  /** Paused with the newest pause on this node's disk only (see `pauseStored`). */
  uploadPending?: boolean;
  cpuCount: number;
  memoryMB: number;
}

export interface HostStats {
  cpuCount: number;
  memoryTotalMib: number;
  /** Memory the kernel can hand out without swapping (MemAvailable), not only free pages. */
  memoryAvailableMib: number;
  loadAvg1m: number;
}

export interface NodeIdentity {
  nodeId: string;
  clusterId: string;
  advertiseUrl: string;
  version: string;
  bootId: string;
}

export interface ReportInput {
  identity: NodeIdentity;
  draining: boolean;
  records: readonly RosterSource[];
  host: HostStats;
  limits: { maxSandboxes: number; maxConcurrentStarts: number };
  cacheKeys: string[];
  /** With P2P on: this node's endpoint and a sample of the chunks it serves. */
  p2p?: P2pReport;
}

export interface P2pReport {
  endpointId: string;
  addresses: string[];
  chunkKeys: string[];
}

const STATE: Record<string, SandboxState> = {
  creating: SandboxState.CREATING,
  running: SandboxState.RUNNING,
  pausing: SandboxState.PAUSING,
  paused: SandboxState.PAUSED,
  resuming: SandboxState.RESUMING,
  snapshotting: SandboxState.SNAPSHOTTING,
  forking: SandboxState.FORKING,
  killing: SandboxState.KILLING,
};

const STARTING = new Set(['creating', 'resuming']);

/** The heartbeat of this node: capacity, load and the full roster, from its records and host. */
export function heartbeatRequest(r: ReportInput): MessageInitShape<typeof HeartbeatRequestSchema> {
  const live = r.records.filter((s) => s.state !== 'paused');
  return {
    nodeId: r.identity.nodeId,
    advertiseUrl: r.identity.advertiseUrl,
    version: r.identity.version,
    clusterId: r.identity.clusterId,
    bootId: r.identity.bootId,
    status: r.draining ? NodeStatus.DRAINING : NodeStatus.READY,
    capacity: {
      cpuCount: r.host.cpuCount,
      memoryTotalMib: r.host.memoryTotalMib,
      maxSandboxes: r.limits.maxSandboxes,
      maxConcurrentStarts: r.limits.maxConcurrentStarts,
    },
    load: {
      allocatedCpu: live.reduce((a, s) => a + s.cpuCount, 0),
      allocatedMemoryMib: live.reduce((a, s) => a + s.memoryMB, 0),
      memoryUsedMib: Math.max(0, r.host.memoryTotalMib - r.host.memoryAvailableMib),
      memoryFreeMib: r.host.memoryAvailableMib,
      startsInFlight: live.filter((s) => STARTING.has(s.state)).length,
      runningCount: live.filter((s) => !STARTING.has(s.state)).length,
      pausedCount: r.records.length - live.length,
      cpuLoad1m: r.host.loadAvg1m,
    },
    sandboxes: r.records.map((s) => ({
      sandboxId: s.sandboxId,
      state: STATE[s.state] ?? SandboxState.UNSPECIFIED,
      templateId: s.templateId,
      pauseId: s.pauseId ?? '',
      cpuCount: s.cpuCount,
      memoryMib: s.memoryMB,
      pauseLocalOnly: s.state === 'paused' && !pauseStored(s),
    })),
    cacheKeys: r.cacheKeys,
    ...(r.p2p && {
      p2p: { endpointId: r.p2p.endpointId, addresses: r.p2p.addresses },
      chunkKeys: r.p2p.chunkKeys,
    }),
  };
}
