/** What the orchestrator reports about itself; the metrics module implements it. */
export interface LifecycleObserver {
  /** A lifecycle stage (create, pause, resume, snapshot, fork, kill) finished in `ms`. */
  stage(name: string, ms: number): void;
  failed(name: string): void;
  /** A sandbox's lifecycle event (kept per sandbox, and reported to the cluster scheduler). */
  event?(e: LifecycleEvent): void;
}

export type LifecycleEventType =
  'created' | 'paused' | 'resumed' | 'killed' | 'exited' | 'forked' | 'snapshot' | 'lost';

export interface LifecycleEvent {
  type: LifecycleEventType;
  sandboxId: string;
  reason?: string;
  details?: Record<string, string>;
}
