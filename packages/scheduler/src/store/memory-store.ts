import { EventEmitter } from 'node:events';
import type { Clock } from '../clock.js';
import type {
  AnnouncedCapture,
  Binding,
  NodeRecord,
  Reservation,
  RosterEntry,
  SandboxEvent,
} from '../model.js';
import { announcedId, DEFAULT_EVENT_RETENTION, type EventRetention, type SchedulerStore } from './store.js';

/** Sandboxes whose events are kept; the least recently written go first. */
const MAX_EVENT_SANDBOXES = 10_000;

interface Expiring<T> {
  value: T;
  expiresMs: number;
}

/**
 * State in this process only: one scheduler replica, rebuilt from the nodes' next heartbeats
 * (rosters carry every binding) after a restart. Expiry is checked against the injected clock.
 */
export class MemoryStore implements SchedulerStore {
  readonly shared = false;
  private readonly nodes = new Map<string, { node: NodeRecord; roster: RosterEntry[]; expiresMs: number }>();
  private readonly chunkKeys = new Map<string, string[]>();
  private readonly drainMarks = new Map<string, string>();
  private readonly bindings = new Map<string, Expiring<Binding>>();
  private readonly byNode = new Map<string, Set<string>>();
  private readonly reservations = new Map<string, Reservation>();
  private readonly announced = new Map<string, AnnouncedCapture>();
  private readonly events = new Map<string, Expiring<SandboxEvent[]>>();
  private readonly claims = new Map<string, number>();
  private readonly bus = new EventEmitter().setMaxListeners(0);

  constructor(
    private readonly clock: Clock,
    private readonly retention: EventRetention = DEFAULT_EVENT_RETENTION,
  ) {}

  async putNode(node: NodeRecord, roster: readonly RosterEntry[], ttlMs: number): Promise<void> {
    this.nodes.set(node.nodeId, {
      node: structuredClone(node),
      roster: roster.map(flat),
      expiresMs: this.clock.now() + ttlMs,
    });
  }

  /** A node not yet expired; an expired one is forgotten with its chunk keys and drain mark. */
  private node(nodeId: string) {
    const n = this.nodes.get(nodeId);
    if (!n || n.expiresMs > this.clock.now()) return n;
    this.nodes.delete(nodeId);
    this.chunkKeys.delete(nodeId);
    this.drainMarks.delete(nodeId);
    return undefined;
  }

  async getNode(nodeId: string): Promise<NodeRecord | undefined> {
    const n = this.node(nodeId);
    return n && structuredClone(n.node);
  }

  async listNodes(): Promise<NodeRecord[]> {
    return [...this.nodes.keys()].flatMap((id) => {
      const n = this.node(id);
      return n ? [structuredClone(n.node)] : [];
    });
  }

  async getRoster(nodeId: string): Promise<RosterEntry[]> {
    return (this.node(nodeId)?.roster ?? []).map(flat);
  }

  /** Kept as long as the node is (putNode refreshes both). */
  async putChunkKeys(nodeId: string, keys: readonly string[], _ttlMs: number): Promise<void> {
    this.chunkKeys.set(nodeId, [...keys]);
  }

  async getChunkKeys(nodeId: string): Promise<string[]> {
    return this.node(nodeId) ? [...(this.chunkKeys.get(nodeId) ?? [])] : [];
  }

  /** Kept as long as the node is (putNode refreshes both). */
  async putDrain(nodeId: string, bootId: string, _ttlMs: number): Promise<void> {
    this.drainMarks.set(nodeId, bootId);
  }

  async drains(): Promise<Map<string, string>> {
    return new Map([...this.drainMarks].filter(([id]) => this.node(id)));
  }

  private binding(id: string): Binding | undefined {
    const b = this.bindings.get(id);
    if (!b) return undefined;
    if (b.expiresMs > this.clock.now()) return b.value;
    this.bindings.delete(id);
    this.byNode.get(b.value.nodeId)?.delete(id);
    return undefined;
  }

  async getBindings(sandboxIds: readonly string[]): Promise<Map<string, Binding>> {
    const out = new Map<string, Binding>();
    for (const id of sandboxIds) {
      const b = this.binding(id);
      if (b) out.set(id, flat(b));
    }
    return out;
  }

  async nodeBindings(nodeId: string): Promise<Binding[]> {
    const out: Binding[] = [];
    for (const id of [...(this.byNode.get(nodeId) ?? [])]) {
      const b = this.binding(id);
      if (b?.nodeId === nodeId) out.push(flat(b));
      else this.byNode.get(nodeId)?.delete(id);
    }
    return out;
  }

  async putBindings(bindings: readonly Binding[], ttlMs: number): Promise<void> {
    const expiresMs = this.clock.now() + ttlMs;
    for (const b of bindings) {
      const old = this.bindings.get(b.sandboxId);
      if (old && old.value.nodeId !== b.nodeId) this.byNode.get(old.value.nodeId)?.delete(b.sandboxId);
      this.bindings.set(b.sandboxId, { value: flat(b), expiresMs });
      let set = this.byNode.get(b.nodeId);
      if (!set) this.byNode.set(b.nodeId, (set = new Set()));
      set.add(b.sandboxId);
    }
  }

  async deleteBindings(sandboxIds: readonly string[], nodeId: string): Promise<void> {
    for (const id of sandboxIds) {
      if (this.bindings.get(id)?.value.nodeId !== nodeId) continue;
      this.bindings.delete(id);
      this.byNode.get(nodeId)?.delete(id);
    }
  }

  async putReservations(rs: readonly Reservation[]): Promise<void> {
    for (const r of rs) this.reservations.set(r.id, structuredClone(r));
  }

  async takeReservation(id: string): Promise<Reservation | undefined> {
    const r = this.reservations.get(id);
    this.reservations.delete(id);
    return r && r.expiresMs > this.clock.now() ? r : undefined;
  }

  async listReservations(): Promise<Reservation[]> {
    return this.unexpired(this.reservations);
  }

  /** Copies of a map's records not yet expired; the expired ones are deleted on the way. */
  private unexpired<T extends { expiresMs: number }>(records: Map<string, T>): T[] {
    const now = this.clock.now();
    const out: T[] = [];
    for (const [id, r] of records) {
      if (r.expiresMs > now) out.push(structuredClone(r));
      else records.delete(id);
    }
    return out;
  }

  async putAnnouncedCaptures(captures: readonly AnnouncedCapture[]): Promise<void> {
    for (const c of captures) this.announced.set(announcedId(c), { ...c });
  }

  async listAnnouncedCaptures(): Promise<AnnouncedCapture[]> {
    return this.unexpired(this.announced);
  }

  async deleteAnnouncedCaptures(captures: readonly AnnouncedCapture[]): Promise<void> {
    for (const c of captures) this.announced.delete(announcedId(c));
  }

  async appendEvent(e: SandboxEvent): Promise<void> {
    const now = this.clock.now();
    const cur = this.events.get(e.sandboxId);
    const list = cur && cur.expiresMs > now ? cur.value : [];
    list.push(copyEvent(e));
    if (list.length > this.retention.perSandbox) list.splice(0, list.length - this.retention.perSandbox);
    // Re-inserted so the map's order is least recently written first.
    this.events.delete(e.sandboxId);
    this.events.set(e.sandboxId, { value: list, expiresMs: now + this.retention.ttlMs });
    while (this.events.size > MAX_EVENT_SANDBOXES) this.events.delete(this.events.keys().next().value!);
    this.bus.emit('event', copyEvent(e));
  }

  async listEvents(sandboxId: string, limit: number): Promise<SandboxEvent[]> {
    const cur = this.events.get(sandboxId);
    if (!cur || cur.expiresMs <= this.clock.now()) return [];
    return cur.value.slice(-limit).map(copyEvent);
  }

  subscribeEvents(listener: (e: SandboxEvent) => void): () => void {
    this.bus.on('event', listener);
    return () => void this.bus.off('event', listener);
  }

  async claimOnce(key: string, ttlMs: number): Promise<boolean> {
    const now = this.clock.now();
    for (const [k, exp] of this.claims) if (exp <= now) this.claims.delete(k);
    if (this.claims.has(key)) return false;
    this.claims.set(key, now + ttlMs);
    return true;
  }

  reconnectedAtMs(): undefined {
    return undefined;
  }

  async close(): Promise<void> {
    this.bus.removeAllListeners();
  }
}

/** A copy of a record whose fields are all plain values (roster entries, bindings). */
function flat<T extends RosterEntry | Binding>(r: T): T {
  return { ...r };
}

function copyEvent(e: SandboxEvent): SandboxEvent {
  return { ...e, details: { ...e.details } };
}
