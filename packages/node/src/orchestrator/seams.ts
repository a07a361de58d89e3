import type { Credentials } from '@agentenv/oci';
import type { EgressRules, NetSlot } from '../network/index.js';
import type { Capture, Resources, StartRequest } from '../runtime/index.js';
import type { SandboxRecord } from './record.js';
import type { SandboxState } from './states.js';

/** How a sandbox boots when there is no captured ready state (a cold start from an image). */
export type BootSpec = Omit<StartRequest, 'resources' | 'net'>;

/**
 * A template the orchestrator can create sandboxes from: a captured ready state (envd up, no
 * per-sandbox data) to restore, or, for a cold start, what to boot.
 */
export type ResolvedTemplate = TemplateCommon &
  ({ capture: Capture; boot?: never } | { boot: BootSpec; capture?: never });

interface TemplateCommon {
  templateId: string;
  alias?: string;
  defaults: Resources;
  envdVersion: string;
  /** The envd token already set inside the capture (a snapshot of a secure sandbox), for /init. */
  envdToken?: string;
  /** Set when the template is a snapshot: its id. */
  snapshotId?: string;
  /** A snapshot's or a fork's: the source sandbox's filesSince (SandboxRecord), which it keeps. */
  filesSince?: string;
  /** Lets go of the capture once sandboxes have been restored from it (cache pin). */
  release?: () => void;
  /** envd's defaults at /init (an image's or a build's USER, WORKDIR, ENV); the user defaults to `user`. */
  sandboxDefaults?: { user?: string; workdir?: string; envVars?: Record<string, string> };
}

/** A snapshot: a captured running sandbox that new sandboxes start from. */
export interface SnapshotInfo {
  snapshotID: string;
  names: string[];
  sourceSandboxId: string;
  /** The template the source sandbox was created from. */
  templateId: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
  /** The source sandbox's filesSince (SandboxRecord); absent in snapshots stored before it. */
  filesSince?: string;
  createdAt: string;
  updatedAt: string;
  /** Whether the shared repository holds it (every node may start from it); else this node only. */
  stored: boolean;
}

/** A snapshot just taken: on this node at once, in the shared repository once `stored` settles. */
export interface TakenSnapshot {
  info: SnapshotInfo;
  /** Settles once the repository holds the snapshot; rejects when storing it failed. */
  stored: Promise<void>;
}

/** Where snapshots live (the local disk or the shared snapshot repository). */
export interface SnapshotCatalog {
  /**
   * Takes ownership of a capture directory as a new snapshot, which this node can start from at
   * once and keeps across a restart; a name already in use → conflict. Storing it in the shared
   * repository runs on (`stored`).
   */
  take(
    captureDir: string,
    info: Omit<SnapshotInfo, 'snapshotID' | 'createdAt' | 'updatedAt' | 'stored'>,
    envdToken?: string,
  ): Promise<TakenSnapshot>;
  /** After a restart: stores again what a previous process took but did not store. */
  storeLeftovers(): TakenSnapshot[];
  /** By id or name, what it is (its capture untouched); undefined when unknown. */
  info(idOrName: string): Promise<SnapshotInfo | undefined>;
  /**
   * By id or name, with its capture on this node; undefined when unknown. `release` must be
   * called once the capture has been restored from.
   */
  find(
    idOrName: string,
  ): Promise<{ info: SnapshotInfo; capture: Capture; envdToken?: string; release?: () => void } | undefined>;
  list(filter: { sandboxId?: string; name?: string }): Promise<SnapshotInfo[]>;
  /** False when unknown. */
  delete(idOrName: string): Promise<boolean>;
}

/** What a sandbox starts from. */
export type SandboxSource =
  /** A create's templateID: a snapshot (id or name), else a template (see `template`). */
  | { readonly kind: 'named'; readonly name: string }
  /** A template only: a built one (id, name or name:tag), else `base`. */
  | { readonly kind: 'template'; readonly name: string }
  /** An image booted as it is, without a build (POST /sandboxes-cold); pulled on demand. */
  | {
      readonly kind: 'image';
      readonly image: string;
      readonly resources: Resources;
      readonly credentials?: Credentials;
    }
  /** A running sandbox's capture, taken for a fork: children get the parent's settings. */
  | { readonly kind: 'fork'; readonly capture: Capture; readonly parent: SandboxRecord };

/** Turns a source into something to restore or boot (sources/ implements it). */
export interface SourceResolver {
  /** An unknown name throws DomainError('invalid', …naming it). */
  resolve(source: SandboxSource): Promise<ResolvedTemplate>;
}

/** Network slots for sandboxes (network/). */
export interface SlotProvider {
  acquire(egress: EgressRules): Promise<NetSlot>;
  setEgress(slot: NetSlot, egress: EgressRules): Promise<void>;
  release(slot: NetSlot): Promise<void>;
}

/** What the shared repository keeps of a paused sandbox besides its capture. */
export interface StoredPause {
  /**
   * Its record as it was when paused, without what only the pausing node means (state, handle,
   * local capture, pause ids) and without its secrets.
   */
  readonly sandbox: { readonly sandboxId: string } & Readonly<Record<string, unknown>>;
  /**
   * Its secrets (the env vars given at create, the envd and traffic tokens), sealed. Absent in a
   * pause stored by a node from before sealing: its `sandbox` holds them.
   */
  readonly sealed?: string;
}

/** A stored pause as this node writes it: its secrets sealed. */
export type SealedPause = StoredPause & { readonly sealed: string };

/**
 * Paused sandboxes' captures in the shared snapshot repository, so that whichever node sharing it
 * is asked can resume them. A claim per pause decides which node owns the sandbox: a node resumes
 * a stored pause only while it holds its claim.
 */
export interface PauseRepository {
  /**
   * Stores a pause capture (the directory is left where it is); returns its id. The pause is
   * claimed for this node before it is visible to any other, so no node can take it over until
   * this one lets it go (release). `signal` stops it: nothing is stored and the claim is gone.
   */
  save(captureDir: string, pause: SealedPause, parent?: string, signal?: AbortSignal): Promise<string>;
  /** Lets go of the claim of a pause this node holds: whichever node resumes it first takes it. */
  release(pauseId: string): Promise<void>;
  /**
   * Moves a stored capture into this node's runtime cache so a resume here needs no rebuild;
   * false when the cache has no room (the directory then stays where it is).
   */
  keep(pauseId: string, captureDir: string): Promise<boolean>;
  /** Takes the pause for this node; false when another node took it (resumed it there). */
  claim(pauseId: string): Promise<boolean>;
  /** The capture to restore from (rebuilt from the repository on a cache miss); release after. */
  open(pauseId: string): Promise<{ capture: Capture; release: () => void }>;
  /**
   * Forgets a pause no longer needed (its sandbox was paused again or killed); one that another
   * node claimed is that node's sandbox now and stays.
   */
  drop(pauseId: string): Promise<void>;
  /** The newest pause of a sandbox that another node paused, with what it stored of it. */
  findPaused(sandboxId: string): Promise<{ pauseId: string; pause: StoredPause } | undefined>;
}

/**
 * The node's sandbox records (persistence/ keeps them in SQLite). Synchronous: a state change is
 * one compare-and-set, so two operations on a sandbox can never both win.
 */
export interface SandboxRecordStore {
  insert(rec: SandboxRecord): void;
  /** Writes `rec` only if the stored state is still `expected`; false otherwise. */
  compareAndSet(rec: SandboxRecord, expected: SandboxState): boolean;
  /** Overwrites fields that do not change the state (end time, metadata), if the state is rec's. */
  update(rec: SandboxRecord): void;
  get(id: string): SandboxRecord | undefined;
  delete(id: string): void;
  /** Newest first. */
  all(): SandboxRecord[];
  /** Running records whose end time (`endAt`) is at or before `now` (ISO-8601 UTC), in any order. */
  expiredBy(now: string): SandboxRecord[];
  /** How many records are in each stored state, without reading the records (metrics ask often). */
  countByState(): Map<string, number>;
}

export type CaptureKind = 'pause' | 'snapshot' | 'fork';

/**
 * Directories on this node's disk where captures are written (pauses until the repository and
 * the cache hold them; snapshots and forks until stored or restored from).
 */
export interface CaptureDirs {
  /** A fresh path for a capture of the sandbox; the driver creates it. */
  allocate(sandboxId: string, kind: CaptureKind): string;
  /** Whether `dir` holds a complete capture (capture.json, written last, is there). */
  complete(dir: string): boolean;
  /** Removes one capture directory; a missing one is fine. */
  remove(dir: string): Promise<void>;
  /** Removes every capture of the sandbox. */
  removeAll(sandboxId: string): Promise<void>;
}

/** The host's memory as admission and the warm pool see it. */
export interface HostMemory {
  /** Bytes the kernel can give to new sandboxes without swapping (MemAvailable). */
  availableBytes(): Promise<number>;
}

/** Where a sandbox's volumes are on this host, looked up by name again for each fresh start. */
export interface VolumeLocator {
  /** 400 for a volume that no longer exists or a path where none may be mounted. */
  resolve(
    mounts: readonly { name: string; path: string }[],
  ): readonly { name: string; path: string; hostPath: string }[];
}
