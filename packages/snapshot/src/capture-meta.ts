/**
 * What a capture records: the sandbox it was taken of (resources, layers, mounts, volumes, its
 * first process) and the files the runtime wrote. The runtime's driver contract uses the same
 * shapes for a start request, so they are declared here, with the format, and the runtime
 * imports them.
 */

/**
 * What a sandbox may use. Drivers map these onto their own limits (cgroups, VM size). Sizes are
 * in mebibytes under E2B's names (`memoryMB`, `diskSizeMB`) from the API through to the driver;
 * the scheduler's protocol names the same numbers `memoryMib`.
 */
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

/**
 * A volume given to a sandbox: its host directory appears beneath the sandbox's volume mount
 * point (VOLUMES_SANDBOX_PATH) as `name`, where envd binds it at the paths it was asked for.
 */
export interface SandboxVolume {
  /** A directory name beneath the mount point (a volume name: letters, digits, '-', '_'). */
  readonly name: string;
  readonly hostPath: string;
}

/** The sandbox's first process: envd, started from the read-only tools mount. */
export interface InitProcess {
  readonly args: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
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
  /**
   * The volumes beneath its volume mount point, which a restore binds again (the sandbox's own
   * binds of them are in its memory). Absent: captured without the mount point (older captures),
   * so no volume can be given to a restore of it.
   */
  readonly volumes?: readonly SandboxVolume[];
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
