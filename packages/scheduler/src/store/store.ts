import type {
  AnnouncedCapture,
  Binding,
  NodeRecord,
  Reservation,
  RosterEntry,
  SandboxEvent,
} from '../model.js';

/**
 * Everything the scheduler keeps. One implementation per file: `memory-store.ts` (one replica;
 * rebuilt from the next heartbeats after a restart) and `redis-store.ts` (survives restarts and
 * is shared by replicas). Records are replaced whole, never merged, and each kind of record has
 * one writer path, so concurrent replicas need no transactions:
 * heartbeats write nodes, rosters and chunk keys, UnregisterNode writes drains (and a heartbeat
 * of a node that says it is draining), placements write reservations, RecordCapture writes
 * announced captures (a heartbeat only removes those it lists). Every record expires: what a
 * store loses (a Redis restarted without persistence) the next heartbeats write again.
 */
export interface SchedulerStore {
  /** Whether other scheduler replicas write to this store too. */
  readonly shared: boolean;
  /**
   * When the store last came back after losing its connection (the scheduler's clock), undefined
   * if it never lost it. What it holds then may be older than what was written to it (a Redis
   * restarted from its append-only file lacks up to its last second, one without persistence
   * everything), so rosters are read whole again and a sandbox it does not know is no answer yet.
   */
  reconnectedAtMs(): number | undefined;
  /**
   * Writes a node and its roster; they, and the node's chunk keys, drain mark and binding index,
   * expire `ttlMs` after this write unless written again (heartbeats keep them).
   */
  putNode(node: NodeRecord, roster: readonly RosterEntry[], ttlMs: number): Promise<void>;
  getNode(nodeId: string): Promise<NodeRecord | undefined>;
  listNodes(): Promise<NodeRecord[]>;
  getRoster(nodeId: string): Promise<RosterEntry[]>;
  /** The chunk keys a node advertised for peer-to-peer fetches (kept apart: they are many). */
  putChunkKeys(nodeId: string, keys: readonly string[], ttlMs: number): Promise<void>;
  getChunkKeys(nodeId: string): Promise<string[]>;

  /** Drain marks: node id → the boot id that was drained; kept as long as the node (putNode). */
  putDrain(nodeId: string, bootId: string, ttlMs: number): Promise<void>;
  drains(): Promise<Map<string, string>>;

  getBindings(sandboxIds: readonly string[]): Promise<Map<string, Binding>>;
  /** Bindings whose node is `nodeId` (as far as the node's index knows). */
  nodeBindings(nodeId: string): Promise<Binding[]>;
  /** Writes bindings; each expires `ttlMs` after this write unless written again. */
  putBindings(bindings: readonly Binding[], ttlMs: number): Promise<void>;
  /** Drops the bindings that still point at `nodeId`. */
  deleteBindings(sandboxIds: readonly string[], nodeId: string): Promise<void>;

  /** Writes reservations (a batch of placements' in one write). */
  putReservations(rs: readonly Reservation[]): Promise<void>;
  /** Removes and returns a reservation (undefined when unknown or expired). */
  takeReservation(id: string): Promise<Reservation | undefined>;
  /** Reservations not yet expired. */
  listReservations(): Promise<Reservation[]>;

  /** Writes announced captures; one of the same node and key is replaced. */
  putAnnouncedCaptures(captures: readonly AnnouncedCapture[]): Promise<void>;
  /** Announced captures not yet expired. */
  listAnnouncedCaptures(): Promise<AnnouncedCapture[]>;
  deleteAnnouncedCaptures(captures: readonly AnnouncedCapture[]): Promise<void>;

  /** Stores an event (bounded per sandbox) and publishes it to every subscriber, on all replicas. */
  appendEvent(e: SandboxEvent): Promise<void>;
  /** The newest `limit` events of a sandbox, oldest first. */
  listEvents(sandboxId: string, limit: number): Promise<SandboxEvent[]>;
  subscribeEvents(listener: (e: SandboxEvent) => void): () => void;

  /** True for exactly one caller per key (across replicas) until `ttlMs` passes. */
  claimOnce(key: string, ttlMs: number): Promise<boolean>;

  close(): Promise<void>;
}

/** One announcement per node and key (node ids have no line breaks). */
export const announcedId = (c: Pick<AnnouncedCapture, 'nodeId' | 'key'>) => `${c.nodeId}\n${c.key}`;

/** Bounds on what the stores keep of events. */
export interface EventRetention {
  perSandbox: number;
  ttlMs: number;
}

export const DEFAULT_EVENT_RETENTION: EventRetention = Object.freeze({
  perSandbox: 100,
  ttlMs: 24 * 3600_000,
});
