/**
 * What the dashboard's server side (the node's /dashboard/api routes, a gateway's) and the
 * single-page app exchange. Public API bodies (GET /nodes, /v2/sandboxes, …) are typed where the
 * app reads them (app/api.ts), since a node and a gateway shape some of them differently.
 */

/** Stages the orchestrator reports (create, pause, resume, snapshot, fork, kill, runtime). */
export type StageName = string;

/** One finished or failed lifecycle operation. */
export interface StageSample {
  stage: StageName;
  /** When it finished, unix ms. */
  at: number;
  /** How long it took; 0 for a failure (the observer reports no duration for those). */
  ms: number;
  ok: boolean;
  nodeID?: string;
}

/**
 * A sandbox lifecycle event as the node records it (`GET /sandboxes/{id}/events`): created,
 * paused, resumed, killed, exited, forked, snapshot, lost. A gateway's come from the cluster
 * scheduler, spelled differently; `toSandboxEvent` reads both.
 */
export interface SandboxEvent {
  sandboxID: string;
  nodeID: string;
  type: string;
  timestamp: string;
  reason?: string;
  /** What the event is about: the template, the snapshot taken, the children forked. */
  details?: Record<string, string>;
}

/** The fields of a sandbox the public API lists, as the dashboard reads them. */
export interface ListedSandbox {
  sandboxID: string;
  templateID: string;
  alias?: string;
  state: string;
  startedAt: string;
  endAt: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  metadata: Record<string, string>;
}

/** A row of the sandboxes table: the listed fields, where it runs, and what it uses now. */
export interface DashboardSandbox extends ListedSandbox {
  nodeID: string;
  /** The node's own state (creating, running, pausing, paused, …), not only running/paused. */
  state: string;
  /** Measured by envd, for running sandboxes on this page; absent when it did not answer. */
  cpuUsedPct?: number;
  memUsedMiB?: number;
}

export interface SandboxPage {
  items: DashboardSandbox[];
  /** Sandboxes matching the filter, over all pages. */
  total: number;
  offset: number;
  limit: number;
}

/** GET /dashboard/api/summary: the overview's numbers. */
export interface Summary {
  /** Node ids this summary covers (one on a stand-alone node). */
  nodeIDs: string[];
  now: number;
  /** How far back `samples` go, ms. */
  windowMs: number;
  /** Sandboxes by the node's state, every state present. */
  counts: Record<string, number>;
  samples: StageSample[];
}

/** A snapshot or template build as the repository records it, with what the public API omits. */
export interface CatalogEntry {
  id: string;
  kind: 'snapshot' | 'template';
  names: string[];
  /** The previous capture of the same sandbox, stored as a delta against it. */
  parent?: string;
  bytesTotal: number;
  createdAt: string;
  sandboxID?: string;
  templateID?: string;
  buildID?: string;
}

/** GET /dashboard/api/catalog. */
export interface Catalog {
  entries: CatalogEntry[];
  /** Per node: its runtime cache. */
  caches: { nodeID: string; usedBytes: number; capacityBytes: number; entries: number }[];
}

/** Metrics of one sandbox as its envd measured them (the E2B metrics body). */
export interface SandboxMetric {
  timestampUnix: number;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  diskUsed: number;
  diskTotal: number;
}

/** Server-sent event names of /dashboard/api/stream. */
export const STREAM_EVENTS = ['hello', 'sandbox', 'stage', 'node', 'sandbox-metrics'] as const;
export type StreamEventName = (typeof STREAM_EVENTS)[number];

/** Every state a node's sandbox can be in, in the order the overview shows them. */
export const SANDBOX_STATES = [
  'running',
  'paused',
  'creating',
  'resuming',
  'pausing',
  'snapshotting',
  'forking',
  'killing',
] as const;
