import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type {
  LifecycleEvent,
  LifecycleObserver,
  MemoryFigures,
  SandboxState,
} from '../orchestrator/index.js';

/**
 * How often the event-loop lag histogram samples (prom-client's default is 10 ms). Each sample is
 * a timer on the event loop: at 10 ms those wakeups alone kept an idle node at ~0.8 % of a core;
 * at 100 ms a stall still shows (one longer than 100 ms always delays a sample).
 */
const EVENT_LOOP_PRECISION_MS = 100;

/** The node's Prometheus metrics (GET /metrics). */
export class NodeMetrics implements LifecycleObserver {
  readonly registry = new Registry();
  readonly requestDuration = new Histogram({
    name: 'aenv_http_request_duration_seconds',
    help: 'API request durations',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  private readonly stages = new Histogram({
    name: 'aenv_lifecycle_stage_duration_seconds',
    help: 'Durations of sandbox lifecycle operations',
    labelNames: ['stage'] as const,
    buckets: [0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 30],
    registers: [this.registry],
  });
  private readonly failures = new Counter({
    name: 'aenv_lifecycle_failures_total',
    help: 'Failed sandbox lifecycle operations',
    labelNames: ['stage'] as const,
    registers: [this.registry],
  });

  private readonly events = new Counter({
    name: 'aenv_lifecycle_events_total',
    help: 'Sandbox lifecycle events by type and reason',
    labelNames: ['type', 'reason'] as const,
    registers: [this.registry],
  });

  constructor(sources: {
    sandboxCounts: () => Record<SandboxState, number>;
    poolSizes: () => Record<string, number>;
    memory?: () => MemoryFigures | undefined;
  }) {
    collectDefaultMetrics({
      register: this.registry,
      prefix: 'aenv_node_',
      eventLoopMonitoringPrecision: EVENT_LOOP_PRECISION_MS,
    });
    new Gauge({
      name: 'aenv_sandboxes',
      help: 'Sandboxes on this node by state',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        for (const [state, n] of Object.entries(sources.sandboxCounts())) this.set({ state }, n);
      },
    });
    new Gauge({
      name: 'aenv_pool_ready',
      help: 'Ready entries in warm pools',
      labelNames: ['pool'] as const,
      registers: [this.registry],
      collect() {
        for (const [pool, n] of Object.entries(sources.poolSizes())) this.set({ pool }, n);
      },
    });
    new Gauge({
      name: 'aenv_memory_bytes',
      help: 'Sandbox memory: nominal (memoryMB), measured (working sets), free (for new sandboxes), host total, limit',
      labelNames: ['kind'] as const,
      registers: [this.registry],
      collect() {
        const f = sources.memory?.();
        if (!f) return;
        for (const kind of ['nominal', 'measured', 'free', 'hostTotal', 'limit'] as const) {
          const v = f[kind];
          if (v !== undefined && Number.isFinite(v))
            this.set({ kind: kind === 'hostTotal' ? 'host_total' : kind }, v);
        }
      },
    });
  }

  stage(name: string, ms: number): void {
    this.stages.observe({ stage: name }, ms / 1000);
  }

  failed(name: string): void {
    this.failures.inc({ stage: name });
  }

  event(e: LifecycleEvent): void {
    this.events.inc({ type: e.type, reason: e.reason });
  }
}
