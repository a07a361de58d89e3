import { DomainError } from '@agentenv/common';
import type { EgressRules } from '../network/index.js';
import type { SandboxHandle } from '../runtime/index.js';
import { SANDBOX_STATES, type SandboxState } from './states.js';

/**
 * The version of the record format this node writes. Records are read by other nodes (a pause in
 * the shared repository carries one) and by later versions of this node (the SQLite store), so a
 * change that an older reader would misread takes a new version; fields that may be absent can be
 * added without one.
 */
export const SANDBOX_RECORD_VERSION = 1;

/** Everything the node keeps about one sandbox; persisted so paused sandboxes survive restarts. */
export interface SandboxRecord {
  /** The record format (SANDBOX_RECORD_VERSION when written by this node). */
  version: number;
  sandboxId: string;
  templateId: string;
  alias?: string;
  state: SandboxState;
  startedAt: string;
  /**
   * Since when its files differ from its template's ready state: its start, or for a sandbox made
   * from a snapshot or a fork, that of the sandbox first started from the template. A
   * filesystem-only pause stores what changed since then (absent in older records: startedAt).
   */
  filesSince?: string;
  endAt: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  /** TTL expiry pauses (true) or kills (false). */
  autoPause: boolean;
  /** false: the TTL pause keeps the filesystem only (absent: memory too). */
  autoPauseMemory?: boolean;
  /** Proxy traffic to a paused sandbox resumes it. */
  autoResume: boolean;
  secure: boolean;
  /** The envd access token, when secure (HMAC of the id with the node secret; kept for re-init). */
  envdAccessToken?: string;
  egress: EgressRules;
  allowPublicTraffic: boolean;
  trafficAccessToken?: string;
  /** The Host its servers see on proxied requests (`${PORT}` is the port asked for); absent: the client's. */
  maskRequestHost?: string;
  envdVersion: string;
  /** Volumes bind-mounted into it (they stay in its captures, so pause/resume and forks keep them). */
  volumeMounts?: { name: string; path: string }[];
  /** The live runtime sandbox, while running. */
  handle?: SandboxHandle;
  /** Directory of a local capture holding its state, while paused (absent once it moved to the cache). */
  captureDir?: string;
  /**
   * Its newest pause in the snapshot repository, whose claim this node holds: the state to
   * resume from while paused, and the parent of the next pause while running.
   */
  pauseId?: string;
  /**
   * Paused, with the repository upload of the local capture (captureDir) not done yet; pauseId
   * is then the previous pause. Kept across restarts so the upload is started again.
   */
  uploadPending?: boolean;
  /** Paused to relieve host memory pressure: its next request resumes it, whatever autoResume. */
  pausedForMemory?: boolean;
  /** While paused: 'filesystem' when only the writable layer was kept (resume cold-boots). */
  pauseKind?: PauseKind;
}

/** Since when the sandbox's files differ from its template's ready state (see filesSince above). */
export const filesSince = (rec: Pick<SandboxRecord, 'filesSince' | 'startedAt'>): string =>
  rec.filesSince ?? rec.startedAt;

/**
 * Paused, with its newest pause in the snapshot repository: any node sharing it can resume the
 * sandbox, and losing this node loses nothing. False while the upload is under way (or after it
 * failed): the capture is on this node's disk only.
 */
export const pauseStored = (rec: { state: string; uploadPending?: boolean; pauseId?: string }): boolean =>
  rec.state === 'paused' && rec.uploadPending !== true && rec.pauseId !== undefined;

/** What a pause keeps: memory and filesystem (restored as it was), or the filesystem only. */
export type PauseKind = 'memory' | 'filesystem';

/** A stored record this node cannot read: written by a newer node, or damaged. */
export class SandboxRecordError extends DomainError {
  override readonly name = 'SandboxRecordError';
  constructor(message: string) {
    super('conflict', message);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const REQUIRED_STRINGS = ['sandboxId', 'templateId', 'startedAt', 'endAt', 'envdVersion'] as const;
const REQUIRED_NUMBERS = ['cpuCount', 'memoryMB', 'diskSizeMB'] as const;

/**
 * A record read back from storage (`where` names it in errors). Records from before versioning
 * are version 1; a version above this node's is refused, since its fields may mean something
 * this node does not know.
 */
export function readSandboxRecord(value: unknown, where: string): SandboxRecord {
  if (!isObject(value)) throw new SandboxRecordError(`${where}: not a sandbox record`);
  const version = value.version ?? 1;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1)
    throw new SandboxRecordError(`${where}: bad record version ${JSON.stringify(version)}`);
  if (version > SANDBOX_RECORD_VERSION) {
    throw new SandboxRecordError(
      `${where} has record version ${version}, newer than this node reads (${SANDBOX_RECORD_VERSION}): ` +
        'it was written by a newer AgentENV node; upgrade this node to use it',
    );
  }
  for (const k of REQUIRED_STRINGS)
    if (typeof value[k] !== 'string') throw new SandboxRecordError(`${where}: missing ${k}`);
  for (const k of REQUIRED_NUMBERS)
    if (typeof value[k] !== 'number') throw new SandboxRecordError(`${where}: missing ${k}`);
  if (!SANDBOX_STATES.includes(value.state as SandboxState))
    throw new SandboxRecordError(`${where}: unknown state ${JSON.stringify(value.state)}`);
  if (!isObject(value.egress)) throw new SandboxRecordError(`${where}: missing egress`);
  return { ...(value as unknown as SandboxRecord), version };
}
