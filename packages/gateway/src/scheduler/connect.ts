import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import { createSchedulerClient, fromConnectError, type SchedulerClient } from '@agentenv/scheduler';
import {
  NodeStatus as PbNodeStatus,
  PlacementKind,
  SandboxEventType,
  SandboxState,
  type Node,
  type SandboxEvent,
} from '@agentenv/protocol/scheduler';
import {
  PlacementRefused,
  SchedulerUnavailable,
  type Binding,
  type ClusterEvent,
  type NodeRef,
  type NodeStatus,
  type Placement,
  type PlacementHint,
  type Scheduler,
} from './scheduler.js';

const STATUS: Record<PbNodeStatus, NodeStatus> = {
  [PbNodeStatus.UNSPECIFIED]: 'unhealthy',
  [PbNodeStatus.READY]: 'ready',
  [PbNodeStatus.DRAINING]: 'draining',
  [PbNodeStatus.UNHEALTHY]: 'unhealthy',
  [PbNodeStatus.CONNECTING]: 'connecting',
};

const KIND: Record<NonNullable<PlacementHint['kind']>, PlacementKind> = {
  create: PlacementKind.CREATE,
  resume: PlacementKind.RESUME,
  fork_spill: PlacementKind.FORK_SPILL,
};

/** Lower-case names of the protobuf enums, as the REST surface spells states and events. */
const stateName = (s: SandboxState) => (SandboxState[s] ?? 'UNSPECIFIED').toLowerCase();
const eventName = (t: SandboxEventType) => (SandboxEventType[t] ?? 'UNSPECIFIED').toLowerCase();
const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : undefined);

/** A scheduler.v1 node as GET /nodes shows it (AGENTENV-API.md §1). */
export function nodeBody(n: Node): Record<string, unknown> {
  return {
    nodeID: n.ref?.nodeId ?? '',
    url: n.ref?.advertiseUrl ?? '',
    clusterID: n.clusterId,
    status: STATUS[n.status],
    version: n.version,
    lastHeartbeat: iso(n.lastHeartbeat) ?? null,
    sandboxCount: n.load?.runningCount ?? 0,
    startingSandboxCount: n.load?.startsInFlight ?? 0,
    pausedSandboxCount: n.load?.pausedCount ?? 0,
    reservedCount: n.reservedCount,
    allocatedCPU: n.load?.allocatedCpu ?? 0,
    allocatedMemoryMiB: n.load?.allocatedMemoryMib ?? 0,
    cpuCount: n.capacity?.cpuCount ?? 0,
    cpuLoad1m: n.load?.cpuLoad1m ?? 0,
    memoryTotalMiB: n.capacity?.memoryTotalMib ?? 0,
    memoryUsedMiB: n.load?.memoryUsedMib ?? 0,
    memoryFreeMiB: n.load?.memoryFreeMib ?? 0,
    maxSandboxes: n.capacity?.maxSandboxes ?? 0,
    cacheKeyCount: n.cacheKeyCount,
    expected: n.expected,
  };
}

const refOf = (n: Node): NodeRef => ({
  nodeId: n.ref?.nodeId ?? '',
  url: n.ref?.advertiseUrl ?? '',
  status: STATUS[n.status],
});

function eventOf(e: SandboxEvent): ClusterEvent {
  return {
    eventId: e.eventId,
    sandboxId: e.sandboxId,
    nodeId: e.nodeId,
    type: eventName(e.type),
    ...(e.reason ? { reason: e.reason } : {}),
    time: iso(e.time) ?? new Date().toISOString(),
    details: { ...e.details },
  };
}

/** A failed call as the gateway's scheduler errors, from the kind the scheduler's mapping reads. */
export function mapped(err: unknown, rpc: string): Error {
  const e = fromConnectError(err);
  // A placement the scheduler could not decide in time (it is swamped, as in a burst) is a busy
  // cluster to retry, not a failure; a scheduler that cannot be reached at all is down (503).
  if (rpc === 'Schedule' && e.kind === 'timeout')
    return new PlacementRefused('cluster_full', 'the scheduler is busy placing other sandboxes', 2);
  if (!e.reached) return new SchedulerUnavailable(`${rpc}: ${(err as Error).message}`);
  if (e.kind === 'capacity') return new PlacementRefused('cluster_full', e.message, e.retryAfter ?? 5);
  if (e.kind === 'unavailable' && rpc === 'Schedule')
    return new PlacementRefused('no_healthy_node', e.message, 5);
  return new SchedulerUnavailable(
    `${rpc}: ${e.kind === 'unauthorized' ? 'the scheduler refused the API key' : e.message}`,
  );
}

const notFound = (err: unknown) => fromConnectError(err).kind === 'not_found';

/** The gateway's Scheduler over scheduler.v1 (Connect, HTTP/1.1 or h2c by the URL). */
export class ConnectScheduler implements Scheduler {
  private readonly client: SchedulerClient;

  /**
   * @param callTimeoutMs a scheduler that does not answer within this is down for the request
   *   (503), not a hang
   */
  constructor(
    baseUrl: string,
    apiKey: string,
    private readonly callTimeoutMs = 10_000,
  ) {
    // Each call sets its own deadline, and WatchEvents none.
    this.client = createSchedulerClient({ url: baseUrl, apiKey, timeoutMs: 0 });
  }

  private async call<T>(rpc: string, work: (opts: { timeoutMs: number }) => Promise<T>): Promise<T> {
    try {
      return await work({ timeoutMs: this.callTimeoutMs });
    } catch (err) {
      throw mapped(err, rpc);
    }
  }

  async schedule(hint: PlacementHint): Promise<Placement> {
    const r = await this.call('Schedule', (o) =>
      this.client.schedule(
        {
          kind: KIND[hint.kind ?? 'create'],
          templateId: hint.templateId ?? '',
          snapshotId: hint.snapshotId ?? '',
          pauseId: hint.pauseId ?? '',
          sandboxId: hint.sandboxId ?? '',
          // The scheduler derives the captures' cache keys from these ids (startCacheKeys).
          cacheKeys: [],
          resources: { cpuCount: hint.cpuCount ?? 0, memoryMib: hint.memoryMib ?? 0 },
          excludeNodeIds: hint.excludeNodes ?? [],
        },
        o,
      ),
    );
    if (!r.node) throw new SchedulerUnavailable('Schedule answered without a node');
    return {
      node: { nodeId: r.node.nodeId, url: r.node.advertiseUrl, status: 'ready' },
      reservationId: r.reservationId,
      localityHit: r.localityHit,
    };
  }

  async lookupNode(sandboxId: string): Promise<Binding | undefined> {
    try {
      const r = await this.client.lookupNode({ sandboxId }, { timeoutMs: this.callTimeoutMs });
      if (!r.node) return undefined;
      return {
        node: { nodeId: r.node.nodeId, url: r.node.advertiseUrl, status: STATUS[r.nodeStatus] },
        state: r.sandbox ? stateName(r.sandbox.state) : 'unspecified',
        ...(r.sandbox?.pauseId ? { pauseId: r.sandbox.pauseId } : {}),
        ...(r.sandbox?.pauseLocalOnly ? { pauseLocalOnly: true } : {}),
      };
    } catch (err) {
      if (notFound(err)) return undefined;
      throw mapped(err, 'LookupNode');
    }
  }

  async recordAssignment(sandboxId: string, nodeId: string, reservationId?: string): Promise<void> {
    await this.call('RecordAssignment', (o) =>
      this.client.recordAssignment(
        { sandboxIds: [sandboxId], nodeId, reservationId: reservationId ?? '' },
        o,
      ),
    );
  }

  async releaseReservation(reservationId: string): Promise<void> {
    await this.call('ReleaseReservation', (o) => this.client.releaseReservation({ reservationId }, o));
  }

  async recordPause(sandboxId: string, nodeId: string, stored: boolean): Promise<void> {
    await this.call('RecordPause', (o) => this.client.recordPause({ sandboxId, nodeId, stored }, o));
  }

  async recordSnapshot(nodeId: string, snapshotId: string, names: readonly string[]): Promise<void> {
    await this.call('RecordCapture', (o) =>
      this.client.recordCapture({ nodeId, snapshotId, snapshotNames: [...names] }, o),
    );
  }

  async listNodes() {
    const r = await this.call('ListNodes', (o) => this.client.listNodes({}, o));
    return r.nodes.map((n) => ({ ref: refOf(n), info: nodeBody(n) }));
  }

  async getNode(nodeId: string) {
    try {
      const r = await this.client.getNode({ nodeId }, { timeoutMs: this.callTimeoutMs });
      return r.node ? { ref: refOf(r.node), info: nodeBody(r.node) } : undefined;
    } catch (err) {
      if (notFound(err)) return undefined;
      throw mapped(err, 'GetNode');
    }
  }

  async sandboxEvents(sandboxId: string): Promise<ClusterEvent[]> {
    const r = await this.call('ListSandboxEvents', (o) =>
      this.client.listSandboxEvents({ sandboxId, limit: 1000 }, o),
    );
    return r.events.map(eventOf);
  }

  async *watchEvents(signal: AbortSignal, sandboxId?: string): AsyncIterable<ClusterEvent> {
    try {
      for await (const r of this.client.watchEvents({ sandboxId: sandboxId ?? '' }, { signal }))
        if (r.event) yield eventOf(r.event);
    } catch (err) {
      if (signal.aborted) return;
      throw mapped(err, 'WatchEvents');
    }
  }
}
