/**
 * The runtime driver contract: one implementation per isolation technology (gVisor today,
 * Firecracker later). The orchestrator only talks to this interface; the conformance suite in
 * test/runtime runs the same tests against every driver.
 */

import type {
  Capture,
  CaptureMeta,
  InitProcess,
  ReadOnlyMount,
  Resources,
  SandboxVolume,
} from '@agentenv/snapshot';

export type { Capture, CaptureMeta, InitProcess, ReadOnlyMount, Resources, SandboxVolume };

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
  readonly volumes?: readonly SandboxVolume[];
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
  /** Volumes added to the capture's own (one of the same name replaces the capture's). */
  readonly volumes?: readonly SandboxVolume[];
}

/** Cumulative CPU figures of a sandbox's host processes. */
export interface CpuUse {
  /** CPU time they got, in ns (SandboxStats.cpuNs). */
  cpuNs: number;
  /**
   * Per host thread id: how long it was runnable, running or waiting for a CPU, in ns. On a
   * loaded host a busy thread gets little CPU but stays runnable; empty when the driver cannot tell.
   */
  runnableNs: ReadonlyMap<number, number>;
}

export interface SandboxStats {
  /** Cumulative CPU time, nanoseconds. */
  readonly cpuNs: number;
  /** Memory charged to the sandbox (its cgroup's usage, page cache included). */
  readonly memoryBytes: number;
  /** memoryBytes minus the inactive file cache the kernel reclaims first: what admission counts. */
  readonly workingSetBytes: number;
  /** Proportional set size of the sandbox's host processes, when the driver can tell. */
  readonly pssBytes: number | null;
  readonly memoryLimitBytes: number;
  /** Bytes held by the writable layer, when the driver can tell. */
  readonly diskBytes: number | null;
  readonly pids: number | null;
}

/** `frozen`: stopped by freeze() until thaw(), using no CPU; `paused`: by pause() until resume(). */
export type SandboxStatus = 'running' | 'paused' | 'frozen' | 'stopped' | 'unknown';

/**
 * A sandbox that is stopped (unreachable, its processes gone) but whose host resources are still
 * being reclaimed in the background; capacity should count it until released() resolves.
 */
export interface ReleasingSandbox {
  readonly id: string;
  /** What it was given; null for leftovers the driver only knows by id. */
  readonly resources: Resources | null;
  /** Milliseconds since the epoch at which it stopped. */
  readonly since: number;
}

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
  /**
   * Memory and filesystem captured at one instant. Resolves once the capture is complete and,
   * with leaveRunning false, the sandbox is stopped; its resources are then reclaimed in the
   * background (see released()). On failure the sandbox keeps running.
   */
  checkpoint(handle: SandboxHandle, opts: CheckpointOptions): Promise<Capture>;
  /** A new, independent sandbox from a capture. On failure nothing is left behind. */
  restore(req: RestoreRequest): Promise<SandboxHandle>;
  pause(handle: SandboxHandle): Promise<void>;
  /** Runs a paused sandbox again; a suspended one is owed no checkpoint any more. */
  resume(handle: SandboxHandle): Promise<void>;
  /**
   * Pauses a sandbox ahead of a checkpoint into `captureDir` (checkpoint() with leaveRunning
   * keeps it paused). Should this process die before that checkpoint is complete, the next
   * driver's prepare() takes it before reclaiming the sandbox, so a pause may answer once the
   * sandbox is suspended and survive a crash of the node.
   */
  suspend(handle: SandboxHandle, captureDir: string): Promise<void>;
  /**
   * Stops every process of the sandbox entirely (no CPU at all, memory kept) until thaw(). Other
   * operations on a frozen sandbox thaw it first (kill does not need to).
   */
  freeze(handle: SandboxHandle): Promise<void>;
  /** Lets a frozen sandbox run again; it answers as before. No-op when it is not frozen. */
  thaw(handle: SandboxHandle): Promise<void>;
  /**
   * Stops the sandbox: resolves once it is unreachable and none of its processes runs (its
   * network namespace is free again). Its mounts, cgroups and runtime state are reclaimed in
   * the background (see released()). Idempotent.
   */
  kill(handle: SandboxHandle): Promise<void>;
  /** Resolves once nothing of the sandbox is left on the host (at once for one never known). */
  released(id: string): Promise<void>;
  /** Sandboxes stopped by kill/checkpoint/a crash whose resources are still being reclaimed. */
  releasing(): readonly ReleasingSandbox[];
  stats(handle: SandboxHandle): Promise<SandboxStats>;
  /**
   * What the sandbox's host processes used and wanted of the CPU so far, cheap enough to ask
   * every second; null when the driver cannot tell. `threads` false leaves `runnableNs` empty:
   * the per-thread figures cost a read per host thread.
   */
  cpuUse(handle: SandboxHandle, opts?: { threads?: boolean }): Promise<CpuUse | null>;
  status(handle: SandboxHandle): Promise<SandboxStatus>;
  /** Called when a sandbox dies on its own (runtime or envd crash); its resources are released first. */
  onExit(listener: (exit: SandboxExit) => void): () => void;
  /** Kills every sandbox this driver started and waits until all of them are released. */
  close(): Promise<void>;
}
