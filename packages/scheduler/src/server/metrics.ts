import { Counter, Gauge, Registry } from 'prom-client';
import type { NodeView } from '../membership/membership.js';
import type { PlacementKind } from '../model.js';
import type { PlacementObserver, PlacementOutcome } from '../schedule/reservations.js';

/** Prometheus metrics of the scheduler; node gauges are filled from the store when scraped. */
export class SchedulerMetrics implements PlacementObserver {
  readonly registry = new Registry();
  private readonly placements = new Counter({
    name: 'aenv_scheduler_placements_total',
    help: 'Schedule calls by kind, outcome (placed, capacity, unavailable) and whether a node holding the capture was chosen',
    labelNames: ['kind', 'outcome', 'locality'] as const,
    registers: [this.registry],
  });
  private readonly heartbeats = new Counter({
    name: 'aenv_scheduler_heartbeats_total',
    help: 'Heartbeats received, accepted or refused',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  private readonly nodeLoad = new Gauge({
    name: 'aenv_scheduler_node_load',
    help: 'Per-node load as last reported, plus what the scheduler has reserved on it',
    labelNames: ['node', 'measure'] as const,
    registers: [this.registry],
  });
  private readonly nodeStatus = new Gauge({
    name: 'aenv_scheduler_node_status',
    help: '1 for the status each node is in now',
    labelNames: ['node', 'status'] as const,
    registers: [this.registry],
  });
  private readonly heartbeatAge = new Gauge({
    name: 'aenv_scheduler_heartbeat_age_seconds',
    help: 'Seconds since each node last heartbeated',
    labelNames: ['node'] as const,
    registers: [this.registry],
  });
  private readonly reservations = new Gauge({
    name: 'aenv_scheduler_reservations_in_flight',
    help: 'Sandboxes reserved by Schedule and not yet assigned, released or expired',
    registers: [this.registry],
  });

  placement(kind: PlacementKind, outcome: PlacementOutcome, localityHit: boolean): void {
    this.placements.inc({ kind, outcome, locality: localityHit ? 'hit' : 'miss' });
  }

  heartbeat(ok: boolean): void {
    this.heartbeats.inc({ outcome: ok ? 'accepted' : 'refused' });
  }

  /** The exposition text, with node gauges as of now. */
  async render(views: NodeView[], now: number): Promise<string> {
    this.nodeLoad.reset();
    this.nodeStatus.reset();
    this.heartbeatAge.reset();
    let reserved = 0;
    for (const { node, status, reserved: r } of views) {
      const l = node.load;
      const measures: Record<string, number> = {
        allocated_cpu: l.allocatedCpu,
        allocated_memory_mib: l.allocatedMemoryMib,
        memory_used_mib: l.memoryUsedMib,
        memory_free_mib: l.memoryFreeMib,
        running: l.runningCount,
        paused: l.pausedCount,
        starts_in_flight: l.startsInFlight,
        reserved: r.count,
      };
      for (const [measure, v] of Object.entries(measures))
        this.nodeLoad.set({ node: node.nodeId, measure }, v);
      this.nodeStatus.set({ node: node.nodeId, status }, 1);
      if (node.lastHeartbeatMs !== undefined)
        this.heartbeatAge.set({ node: node.nodeId }, (now - node.lastHeartbeatMs) / 1000);
      reserved += r.count;
    }
    this.reservations.set(reserved);
    return this.registry.metrics();
  }
}
