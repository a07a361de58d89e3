export { Orchestrator, type CreateSandboxInput, type OrchestratorDeps } from './orchestrator.js';
export { SandboxWarmPool, type PooledSandbox } from './warm-pool.js';
export { isTransient, visibleState, type SandboxState, type Operation } from './states.js';
export type { SandboxRecord } from './record.js';
export type { LifecycleEvent, LifecycleEventType, LifecycleObserver } from './observer.js';
export type {
  BootSpec,
  PauseRepository,
  ResolvedTemplate,
  SandboxSource,
  SlotProvider,
  SnapshotCatalog,
  SnapshotInfo,
  SourceResolver,
} from './seams.js';
export { SandboxStore, RepositoryPauses } from './persistence/index.js';
export { logLine, queryLogs, type SandboxLogEntry } from './sandbox-logs.js';
