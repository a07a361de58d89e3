import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The gateway's /metrics: placements by outcome, the create queue, per-node load, durations. */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly placements: Counter<'outcome'>;
  readonly queueWait: Histogram<string>;
  readonly requestDuration: Histogram<'route' | 'method' | 'status'>;

  constructor(o: {
    queue: () => { waiting: number; inFlight: number };
    nodeLoad: () => Promise<{ nodeId: string; status: string; sandboxes: number }[]>;
  }) {
    const registers = [this.registry];
    this.placements = new Counter({
      name: 'aenv_gateway_placements_total',
      help: 'Placements of new or moved sandboxes by outcome (placed, node_full, node_unreachable, cluster_full, …)',
      labelNames: ['outcome'],
      registers,
    });
    this.queueWait = new Histogram({
      name: 'aenv_gateway_create_queue_wait_seconds',
      help: 'Time creates waited in the admission queue',
      buckets: [0.001, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30],
      registers,
    });
    this.requestDuration = new Histogram({
      name: 'aenv_gateway_request_duration_seconds',
      help: 'Control-plane request durations through the gateway',
      labelNames: ['route', 'method', 'status'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    new Gauge({
      name: 'aenv_gateway_create_queue_depth',
      help: 'Creates waiting in the admission queue',
      registers,
      collect() {
        this.set(o.queue().waiting);
      },
    });
    new Gauge({
      name: 'aenv_gateway_creates_in_flight',
      help: 'Creates forwarded to nodes and not yet answered',
      registers,
      collect() {
        this.set(o.queue().inFlight);
      },
    });
    new Gauge({
      name: 'aenv_gateway_node_sandboxes',
      help: 'Sandboxes per node as the scheduler last heard (per-node load)',
      labelNames: ['node', 'status'],
      registers,
      async collect() {
        this.reset();
        for (const n of await o.nodeLoad().catch(() => []))
          this.set({ node: n.nodeId, status: n.status }, n.sandboxes);
      },
    });
  }
}
