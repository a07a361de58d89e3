import type { LifecycleEvent, LifecycleObserver } from '../orchestrator/index.js';

/** One lifecycle event as the node keeps it and `GET /sandboxes/{id}/events` returns it. */
export interface SandboxEvent {
  type: LifecycleEvent['type'];
  sandboxID: string;
  nodeID: string;
  reason: string;
  details: Record<string, string>;
  timestamp: string;
}

const PER_SANDBOX = 100;
const MAX_SANDBOXES = 10_000;

/**
 * The node's lifecycle events per sandbox, newest 100 each, for the sandboxes written to most
 * recently (in memory: a restarted node starts empty; the cluster scheduler keeps its own copy).
 * Listeners (the cluster agent) see every event as it is recorded.
 */
export class SandboxEventLog {
  private readonly bySandbox = new Map<string, SandboxEvent[]>();
  private readonly listeners = new Set<(e: SandboxEvent) => void>();

  constructor(private readonly nodeId: string) {}

  record(e: LifecycleEvent): SandboxEvent {
    const event: SandboxEvent = {
      type: e.type,
      sandboxID: e.sandboxId,
      nodeID: this.nodeId,
      reason: e.reason,
      details: { ...e.details },
      timestamp: new Date(e.at).toISOString(),
    };
    const list = this.bySandbox.get(e.sandboxId) ?? [];
    list.push(event);
    if (list.length > PER_SANDBOX) list.shift();
    // Re-inserted so the map's order is least recently written first.
    this.bySandbox.delete(e.sandboxId);
    this.bySandbox.set(e.sandboxId, list);
    if (this.bySandbox.size > MAX_SANDBOXES) this.bySandbox.delete(this.bySandbox.keys().next().value!);
    for (const l of this.listeners) l(event);
    return event;
  }

  /** Oldest first; undefined when the node has none for the sandbox. */
  list(sandboxId: string): SandboxEvent[] | undefined {
    const list = this.bySandbox.get(sandboxId);
    return list && [...list];
  }

  onEvent(listener: (e: SandboxEvent) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** This log as one of the orchestrator's observers (beside the metrics; see `observeAll`). */
  readonly observer: LifecycleObserver = {
    stage: () => undefined,
    failed: () => undefined,
    event: (e) => void this.record(e),
  };
}
