import { DEFAULT_POLICY, type PlacementPolicy } from './schedule/scoring/policy.js';
import type { Resources } from './model.js';

/**
 * Heartbeat intervals the scheduler holds what it heard of a node from others (an assignment's
 * reservation, a capture the gateway reported) for the node's own heartbeats to say it.
 */
export const REPORT_GRACE_INTERVALS = 3;

export interface ExpectedNode {
  nodeId: string;
  advertiseUrl?: string;
}

/** How the scheduler behaves; `config.ts` fills it from the environment. */
export interface SchedulerSettings {
  /** How often nodes heartbeat; three missed intervals make a node unhealthy. */
  heartbeatIntervalMs: number;
  /** A reservation not assigned or released within this is given back. */
  reservationTtlMs: number;
  /** A binding not refreshed (by a roster or an assignment) within this is forgotten. */
  bindingTtlMs: number;
  /** How long a sandbox of a failed node is reported lost. */
  lostRetentionMs: number;
  /** How long a paused sandbox of a failed node stays bound to it (lookups say where it was). */
  pausedRetentionMs: number;
  /**
   * How long a silent node is waited for before it is gone for good: until then a sandbox it
   * paused without storing the pause in the shared repository stays paused on it (it comes back
   * when the node restarts); then such a sandbox is lost.
   */
  nodeGoneAfterMs: number;
  /** When not empty, only these nodes may join. */
  expectedNodes: ExpectedNode[];
  /** Resources assumed for a placement that names none (the node's template defaults). */
  defaultResources: Resources;
  policy: PlacementPolicy;
}

export const DEFAULT_SETTINGS: SchedulerSettings = Object.freeze({
  heartbeatIntervalMs: 2000,
  reservationTtlMs: 60_000,
  bindingTtlMs: 60_000,
  lostRetentionMs: 3600_000,
  pausedRetentionMs: 24 * 3600_000,
  nodeGoneAfterMs: 3600_000,
  expectedNodes: [],
  defaultResources: { cpuCount: 2, memoryMib: 1024 },
  policy: DEFAULT_POLICY,
});

/**
 * How long the store keeps what describes a node (its record, roster, chunk keys, drain mark and
 * binding index) after the node's last heartbeat, which refreshes them: as long as a binding to
 * the node may stand (a failed node's paused sandboxes are looked up through it), and one binding
 * lifetime more. A node that is gone for good is then forgotten without anyone removing it.
 */
export function nodeRetentionMs(s: SchedulerSettings): number {
  return Math.max(s.bindingTtlMs, s.lostRetentionMs, s.pausedRetentionMs) + s.bindingTtlMs;
}
