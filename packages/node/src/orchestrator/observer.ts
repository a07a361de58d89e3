/** What the orchestrator reports about itself; the metrics module implements it. */
export interface LifecycleObserver {
  /** A lifecycle stage (create, pause, resume, snapshot, fork, kill) finished in `ms`. */
  stage(name: string, ms: number): void;
  failed(name: string): void;
}
