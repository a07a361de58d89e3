/** What happened to a sandbox, as the node reports it (the scheduler's SandboxEventType). */
export type LifecycleEventType =
  | 'created'
  | 'paused'
  | 'resumed'
  | 'killed'
  /** Its processes ended on their own (envd or the runtime crashed). */
  | 'exited'
  | 'forked'
  | 'snapshot'
  /** Its state is gone: it was running when the node stopped without pausing it. */
  | 'lost';

/** Why it happened. */
export type LifecycleReason =
  /** A client asked (API call). */
  | 'request'
  /** Its end time passed (TTL). */
  | 'timeout'
  /** Traffic through the proxy reached it while paused (autoResume). */
  | 'auto_resume'
  /** The node is stopping and pauses what runs. */
  | 'shutdown'
  /** The runtime reported that it died. */
  | 'runtime_exit'
  /** The node restarted after a crash. */
  | 'node_restart'
  /** Host memory ran short and it was idle (paused), or a request reached it paused so (resumed). */
  | 'memory_pressure'
  /** The cluster declared it lost while this node was silent, and told the node to stop it. */
  | 'fenced';

export interface LifecycleEvent {
  readonly type: LifecycleEventType;
  readonly sandboxId: string;
  readonly reason: LifecycleReason;
  /** Milliseconds since the epoch (the orchestrator's clock). */
  readonly at: number;
  /** The scheduler's keys (scheduler.proto): template_id, snapshot_id, parent_sandbox_id, child_count. */
  readonly details?: Readonly<Record<string, string>>;
}

/** What the orchestrator reports about itself: metrics, and whoever follows sandbox lifecycles. */
export interface LifecycleObserver {
  /** A lifecycle stage (create, pause, resume, snapshot, fork, kill) finished in `ms`. */
  stage(name: string, ms: number): void;
  failed(name: string): void;
  /** A sandbox's lifecycle moved on; called once the change is stored. */
  event(e: LifecycleEvent): void;
}

/** One observer that tells each of `observers`, in order; one that throws does not stop the rest. */
export function observeAll(...observers: LifecycleObserver[]): LifecycleObserver {
  const each = (f: (o: LifecycleObserver) => void) => {
    for (const o of observers) {
      try {
        f(o);
      } catch {
        // An observer's failure is its own; the lifecycle went on regardless.
      }
    }
  };
  return {
    stage: (name, ms) => each((o) => o.stage(name, ms)),
    failed: (name) => each((o) => o.failed(name)),
    event: (e) => each((o) => o.event(e)),
  };
}
