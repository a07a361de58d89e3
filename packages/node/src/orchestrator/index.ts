export { Orchestrator } from './orchestrator.js';
export type { DrainCause, OrchestratorDeps, EndTimeMode } from './core.js';
export type { CreateSandboxInput } from './create.js';
export type { ForkResult } from './fork.js';
export type { SandboxSettings } from './fork-settings.js';
export type { ConnectOptions, ResumeBoot } from './resume.js';
export { SandboxWarmPool, type PooledSandbox, type WarmPoolOptions } from './warm-pool.js';
export { isTransient, visibleState, SANDBOX_STATES, type SandboxState, type Operation } from './states.js';
export {
  filesSince,
  pauseStored,
  readSandboxRecord,
  SandboxRecordError,
  SANDBOX_RECORD_VERSION,
  type SandboxRecord,
} from './record.js';
export {
  observeAll,
  type LifecycleEvent,
  type LifecycleEventType,
  type LifecycleObserver,
  type LifecycleReason,
} from './observer.js';
export {
  Admission,
  maxSandboxes,
  maxStartsInFlight,
  notWhileStopping,
  type AdmissionMeasure,
  type AdmissionRequest,
  type AdmissionTicket,
  type NodeLoad,
} from './admission.js';
export { ActivityTracker } from './activity.js';
export { BackgroundWork, type BackgroundTask } from './background.js';
export { PAUSE_UPLOAD_STAGE } from './pause-upload.js';
export { hasExpired } from './expiry.js';
export { recoveryOf } from './recovery.js';
export { procMeminfo } from './host-memory.js';
export {
  choosePressurePauses,
  memoryRefusal,
  pressureExcess,
  PRESSURE_MIN_IDLE_MS,
  type MemoryFigures,
  type PauseCandidate,
} from './memory-pressure.js';
export type {
  BootSpec,
  CaptureDirs,
  CaptureKind,
  HostMemory,
  PauseRepository,
  ResolvedTemplate,
  SealedPause,
  StoredPause,
  SandboxRecordStore,
  SandboxSource,
  SlotProvider,
  SnapshotCatalog,
  SnapshotInfo,
  TakenSnapshot,
  SourceResolver,
} from './seams.js';
export { SandboxStore, RepositoryPauses, LocalCaptureDirs } from './persistence/index.js';
export { sandboxUsage, type UsageSample } from './sandbox-usage.js';
export { logLine, queryLogs, type SandboxLogEntry } from './sandbox-logs.js';
