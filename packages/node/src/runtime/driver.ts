/**
 * The runtime driver contract: one implementation per isolation technology (gVisor today,
 * Firecracker later). The orchestrator only talks to this interface; the conformance suite in
 * test/runtime runs the same tests against every driver.
 */

/** What a sandbox may use. Drivers map these onto their own limits (cgroups, VM size). */
export interface Resources {
  readonly cpuCount: number;
  readonly memoryMB: number;
  /** Capacity of the sandbox's private writable layer over the read-only template. */
  readonly diskSizeMB: number;
}

/** A host directory made visible inside the sandbox, read-only (e.g. the envd tools bundle). */
export interface ReadOnlyMount {
  readonly hostPath: string;
  readonly sandboxPath: string;
  /** A volume: shared with other sandboxes and the host, so writes go straight through. */
  readonly writable?: boolean;
}

/** The sandbox's first process: envd, started from the read-only tools mount. */
export interface InitProcess {
  readonly args: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

/**
 * Where the sandbox's network lives and how the node reaches it. Structurally a subset of
 * network/slot.ts's NetSlot, so a slot can be passed as is.
 */
export interface SandboxNet {
  /** Network namespace the sandbox runs in (its interfaces and addresses are adopted). */
  readonly netnsPath: string;
  /** Address the node dials to reach a sandbox port. */
  readonly hostAddress: string;
}

/** Everything needed to boot a sandbox from a template for the first time. */
export interface StartRequest {
  /** Read-only root filesystem layers, lowest first; shared with other sandboxes, never written. */
  readonly layers: readonly string[];
  readonly resources: Resources;
  readonly init: InitProcess;
  readonly mounts?: readonly ReadOnlyMount[];
  /** Absent: the sandbox gets no network but loopback (envd is then probed through the runtime). */
  readonly net?: SandboxNet;
  /** Port envd listens on inside the sandbox; the driver waits for GET /health there. */
  readonly envdPort: number;
  readonly hostname?: string;
  readonly readyTimeoutMs?: number;
}

/** A live sandbox as the driver knows it. Plain data: safe to log and to keep in the orchestrator. */
export interface SandboxHandle {
  /** Runtime-level id: fixed length, unique on this node (never a prefix of another id). */
  readonly id: string;
  readonly driver: string;
  readonly resources: Resources;
  readonly net?: SandboxNet;
  readonly envdPort: number;
  /** Milliseconds since the epoch at which envd answered /health. */
  readonly readyAt: number;
  /** The capture it was restored from, if any. */
  readonly restoredFrom?: string;
}

/** Metadata of a capture (capture.json); enough to check a restore request against it. */
export interface CaptureMeta {
  readonly format: 'aenv-capture/1';
  readonly driver: string;
  /** The exact runtime build that wrote it: images only restore under the same build. */
  readonly runtimeVersion: string;
  readonly createdAt: string;
  readonly sourceId: string;
  readonly resources: Resources;
  readonly layers: readonly string[];
  readonly mounts: readonly ReadOnlyMount[];
  readonly init: InitProcess;
  readonly envdPort: number;
  readonly hostname: string;
  /** Driver-specific settings the restore must repeat (e.g. the gVisor overlay medium). */
  readonly settings: Readonly<Record<string, string>>;
  /** Files of the capture with their sizes, checked before a restore. */
  readonly files: readonly { readonly name: string; readonly bytes: number }[];
}

/** A directory holding one consistent sandbox state: memory image, filesystem delta, metadata. */
export interface Capture {
  readonly dir: string;
  readonly meta: CaptureMeta;
}

export interface CheckpointOptions {
  /** Directory to create for the capture; must not exist yet. */
  readonly dir: string;
  /** true: the sandbox keeps running afterwards (fork, snapshot); false: it is gone (pause to disk). */
  readonly leaveRunning: boolean;
}

export interface RestoreRequest {
  /** A capture, or the directory of one (its capture.json is read and checked). */
  readonly capture: Capture | string;
  readonly resources: Resources;
  readonly net?: SandboxNet;
  readonly readyTimeoutMs?: number;
}

export interface SandboxStats {
  /** Cumulative CPU time, nanoseconds. */
  readonly cpuNs: number;
  readonly memoryBytes: number;
  readonly memoryLimitBytes: number;
  /** Bytes held by the writable layer, when the driver can tell. */
  readonly diskBytes: number | null;
  readonly pids: number | null;
}

export type SandboxStatus = 'running' | 'paused' | 'stopped' | 'unknown';

/** Why a sandbox stopped without being asked to. */
export interface SandboxExit {
  readonly id: string;
  readonly reason: string;
}

export type DriverAvailability =
  | { readonly available: true; readonly version: string }
  | { readonly available: false; readonly reason: string };

export interface RuntimeDriver {
  readonly name: string;
  /** Checks host prerequisites; never throws. */
  probe(): Promise<DriverAvailability>;
  /**
   * Readies the driver for work: checks prerequisites (throws when unusable) and releases what a
   * previous process of the same node left behind. Idempotent; other operations call it too.
   */
  prepare(): Promise<void>;
  /** Boots a fresh sandbox and resolves once envd answers /health. */
  start(req: StartRequest): Promise<SandboxHandle>;
  /** Memory and filesystem captured at one instant. On failure the sandbox keeps running. */
  checkpoint(handle: SandboxHandle, opts: CheckpointOptions): Promise<Capture>;
  /** A new, independent sandbox from a capture. On failure nothing is left behind. */
  restore(req: RestoreRequest): Promise<SandboxHandle>;
  pause(handle: SandboxHandle): Promise<void>;
  resume(handle: SandboxHandle): Promise<void>;
  /** Stops the sandbox and releases processes, mounts, cgroups and state. Idempotent. */
  kill(handle: SandboxHandle): Promise<void>;
  stats(handle: SandboxHandle): Promise<SandboxStats>;
  status(handle: SandboxHandle): Promise<SandboxStatus>;
  /** Called when a sandbox dies on its own (runtime or envd crash); its resources are released first. */
  onExit(listener: (exit: SandboxExit) => void): () => void;
  /** Kills every sandbox this driver started and stops its background work. */
  close(): Promise<void>;
}
