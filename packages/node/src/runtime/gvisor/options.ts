import type { UpperMedium } from './bundle.js';
import type { Compression } from './checkpoint.js';

export interface GvisorDriverOptions {
  /** Node-local runtime state: runsc's --root and the per-sandbox bundles. */
  readonly runtimeDir?: string;
  readonly runscPath?: string;
  /** aenv-reaper (see reaper.ts); default: the one built in packages/node/native/build. */
  readonly reaperPath?: string;
  readonly upper?: UpperMedium;
  /** Checkpoint image compression; none is faster to save and restore, flate is smaller. */
  readonly compression?: Compression;
  /** Lets a checkpoint drop established external connections (a restored copy of one misbehaves). */
  readonly netDisconnectOk?: boolean;
  /** cgroup directory under each controller that holds one child per sandbox. */
  readonly cgroupParent?: string;
  /**
   * `spread` (default): each sandbox smaller than the host gets a cpuset of its own least used
   * CPUs, set before it starts. The sentry then sees one CPU per vCPU: measured here, an idle
   * 1-vCPU sandbox costs 40-50 % less CPU and ~6 MiB less PSS than one free to use both cores.
   * `none`: every sandbox may run on every host CPU.
   */
  readonly cpuPlacement?: 'spread' | 'none';
  readonly readyTimeoutMs?: number;
  /** Retries of a checkpoint refused because a connection was still open (the proxy drains them). */
  readonly checkpointRetries?: number;
  readonly monitorIntervalMs?: number;
  /** Delete sandboxes under this runtimeDir left by a previous process (they are orphans). */
  readonly sweepOnInit?: boolean;
  /**
   * Lets the kernel's same-page merging (KSM) scan each sandbox's runsc processes (sentry and
   * gofer: their Go heaps; the guest's memory is a shared file KSM never merges). Off by default:
   * pages merged across sandboxes are a known timing side channel between them. Needs aenv-reaper.
   */
  readonly mergePages?: boolean;
}

/** The options with every default filled in (the paths of runsc and the reaper may stay unset). */
export type DriverSettings = Required<Omit<GvisorDriverOptions, 'runscPath' | 'reaperPath'>> &
  Pick<GvisorDriverOptions, 'runscPath' | 'reaperPath'>;

export function withDefaults(options: GvisorDriverOptions): DriverSettings {
  return {
    runtimeDir: options.runtimeDir ?? '/run/aenv',
    runscPath: options.runscPath,
    reaperPath: options.reaperPath,
    upper: options.upper ?? 'memory',
    compression: options.compression ?? 'none',
    netDisconnectOk: options.netDisconnectOk ?? false,
    cgroupParent: options.cgroupParent ?? 'aenv',
    cpuPlacement: options.cpuPlacement ?? 'spread',
    readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
    checkpointRetries: options.checkpointRetries ?? 5,
    monitorIntervalMs: options.monitorIntervalMs ?? 1000,
    sweepOnInit: options.sweepOnInit ?? true,
    mergePages: options.mergePages ?? false,
  };
}
