import type { Clock } from '../clock.js';
import { withAnnounced } from '../schedule/captures.js';
import {
  NO_RESERVATION,
  type AnnouncedCapture,
  type NodeRecord,
  type NodeStatus,
  type Reservation,
  type Reserved,
} from '../model.js';
import type { Candidate } from '../schedule/scoring/candidate.js';
import { announcedId, type SchedulerStore } from '../store/store.js';

interface State {
  nodes: Map<string, NodeRecord>;
  drains: Map<string, string>;
  reservations: Map<string, Reservation>;
  announced: Map<string, AnnouncedCapture>;
}

type Change = (s: State) => void;

/**
 * What placement decides on, held in this process: every node's last record, the drain marks, the
 * live reservations (summed per node) and the announced captures. This process's own writes change
 * it as they are made (a heartbeat, a reservation and its end, a drain, an announcement), so a
 * placement reads no store; what other replicas write it reloads from the store every
 * `refreshMs`, before the first decision that finds the index older than that, so a replica counts
 * another's reservations at most that much later. A reload replays the changes made while it read
 * and the reservations of this process not yet written, so a write is never lost to a read.
 */
export class NodeIndex {
  private state: State = empty();
  private reserved = new Map<string, Reserved>();
  /** Reservation ids per node. */
  private byNode = new Map<string, Set<string>>();
  /** Node ids, to draw from at random. */
  private ids: string[] = [];
  /** Node ids per cache key the nodes reported. */
  private holders = new Map<string, string[]>();
  private readonly expiries = new ExpiryQueue();
  private loadedMs: number | undefined;
  private loading: Promise<void> | undefined;
  private during: Change[] | undefined;
  /** Reservations of this process whose store write has not yet answered. */
  private readonly unsaved = new Map<string, Reservation>();

  constructor(
    private readonly store: SchedulerStore,
    private readonly clock: Clock,
    private readonly refreshMs: number,
  ) {}

  /** Loaded the first time and again once `refreshMs` old (a failing store fails the caller). */
  async ready(): Promise<void> {
    if (this.loadedMs === undefined || this.clock.now() - this.loadedMs >= this.refreshMs)
      return this.reload();
  }

  private reload(): Promise<void> {
    this.loading ??= (async () => {
      const changes: Change[] = (this.during = []);
      const startedMs = this.clock.now();
      // A write that answers while the store is read may land after the read: what was unsaved
      // when the read began is kept, and a take since then is among the changes replayed.
      const unsavedAtStart = [...this.unsaved.values()];
      try {
        const [nodes, drains, reservations, announced] = await Promise.all([
          this.store.listNodes(),
          this.store.drains(),
          this.store.listReservations(),
          this.store.listAnnouncedCaptures(),
        ]);
        const next: State = {
          nodes: new Map(nodes.map((n) => [n.nodeId, n])),
          drains,
          reservations: new Map(reservations.map((r) => [r.id, r])),
          announced: new Map(announced.map((a) => [announcedId(a), a])),
        };
        for (const r of unsavedAtStart) next.reservations.set(r.id, r);
        for (const c of changes) c(next);
        for (const r of this.unsaved.values()) next.reservations.set(r.id, r);
        this.state = next;
        this.ids = [...next.nodes.keys()];
        this.holders = new Map();
        for (const node of next.nodes.values()) this.hold(node.nodeId, node.cacheKeys, 1);
        this.reserved = new Map();
        this.byNode = new Map();
        this.expiries.clear();
        for (const r of next.reservations.values()) this.count(r, 1);
        this.loadedMs = startedMs;
      } finally {
        this.during = undefined;
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  /** Applies a change now and to a reload under way. */
  private change(c: Change): void {
    c(this.state);
    this.during?.push(c);
  }

  node(nodeId: string): NodeRecord | undefined {
    return this.state.nodes.get(nodeId);
  }

  drainOf(nodeId: string): string | undefined {
    return this.state.drains.get(nodeId);
  }

  putNode(node: NodeRecord): void {
    const old = this.state.nodes.get(node.nodeId);
    if (!old) this.ids.push(node.nodeId);
    if (old?.cacheKeys.join('\n') !== node.cacheKeys.join('\n')) {
      if (old) this.hold(old.nodeId, old.cacheKeys, -1);
      this.hold(node.nodeId, node.cacheKeys, 1);
    }
    this.change((s) => s.nodes.set(node.nodeId, node));
  }

  private hold(nodeId: string, keys: readonly string[], sign: 1 | -1): void {
    for (const key of keys) {
      const ids = this.holders.get(key) ?? [];
      if (sign > 0) this.holders.set(key, ids).get(key)!.push(nodeId);
      else if (ids.length <= 1) this.holders.delete(key);
      else
        this.holders.set(
          key,
          ids.filter((id) => id !== nodeId),
        );
    }
  }

  putDrain(nodeId: string, bootId: string): void {
    this.change((s) => s.drains.set(nodeId, bootId));
  }

  putReservations(rs: readonly Reservation[]): void {
    for (const r of rs) {
      this.unsaved.set(r.id, r);
      this.uncount(r.id);
      this.count(r, 1);
    }
    this.change((s) => rs.forEach((r) => s.reservations.set(r.id, r)));
  }

  /** Ends a reservation here; the store's own take decides who got it. */
  takeReservation(id: string): void {
    this.unsaved.delete(id);
    this.uncount(id);
    this.change((s) => s.reservations.delete(id));
  }

  /** The store holds the reservation now: a reload reads it from there. */
  saved(id: string): void {
    this.unsaved.delete(id);
  }

  /** Live reservations of a node. */
  reservationsOn(nodeId: string): Reservation[] {
    this.expire();
    const ids = [...(this.byNode.get(nodeId) ?? [])];
    return ids.flatMap((id) => this.state.reservations.get(id) ?? []);
  }

  putAnnounced(captures: readonly AnnouncedCapture[]): void {
    this.change((s) => captures.forEach((c) => s.announced.set(announcedId(c), c)));
  }

  deleteAnnounced(captures: readonly AnnouncedCapture[]): void {
    this.change((s) => captures.forEach((c) => s.announced.delete(announcedId(c))));
  }

  /** Live announcements, of one node or of all. */
  announced(nodeId?: string): AnnouncedCapture[] {
    const now = this.clock.now();
    return [...this.state.announced.values()].filter(
      (a) => a.expiresMs > now && (nodeId === undefined || a.nodeId === nodeId),
    );
  }

  get size(): number {
    return this.state.nodes.size;
  }

  /** Every node as placement sees it now: with its announced captures, its status and what is reserved. */
  candidates(statusOf: StatusOf): Candidate[] {
    return this.build(this.state.nodes.values(), statusOf);
  }

  /**
   * A few nodes as `candidates` gives them, so a placement in a big cluster looks at tens of
   * nodes instead of all: the preferred one, up to `perKey` drawn at random among the holders of
   * each requested capture (all of them when fewer) and among nodes announced to hold one, and
   * `others` drawn at random among all.
   */
  sample(
    req: { cacheKeys: readonly string[]; preferNodeId?: string },
    perKey: number,
    others: number,
    statusOf: StatusOf,
    random: () => number,
  ): Candidate[] {
    const picked = new Set<string>();
    if (req.preferNodeId && this.state.nodes.has(req.preferNodeId)) picked.add(req.preferNodeId);
    const keys = new Set(req.cacheKeys);
    const announced = this.announced().filter((a) => keys.has(a.key));
    for (const a of announced) picked.add(a.nodeId);
    for (const key of keys) draw(this.holders.get(key) ?? [], perKey, random, picked);
    draw(this.ids, others, random, picked);
    return this.build(
      [...picked].flatMap((id) => this.state.nodes.get(id) ?? []),
      statusOf,
    );
  }

  private build(nodes: Iterable<NodeRecord>, statusOf: StatusOf): Candidate[] {
    this.expire();
    const announced = this.state.announced.size ? this.announced() : [];
    const out: Candidate[] = [];
    for (const node of nodes)
      out.push({
        node: announced.length ? withAnnounced(node, announced) : node,
        status: statusOf(node, this.state.drains.get(node.nodeId)),
        reserved: this.reserved.get(node.nodeId) ?? NO_RESERVATION,
      });
    return out;
  }

  private count(r: Reservation, sign: 1 | -1): void {
    const cur = this.reserved.get(r.nodeId) ?? { ...NO_RESERVATION };
    cur.count += sign * r.count;
    cur.cpu += sign * r.resources.cpuCount * r.count;
    cur.memoryMib += sign * r.resources.memoryMib * r.count;
    if (cur.count <= 0) this.reserved.delete(r.nodeId);
    else this.reserved.set(r.nodeId, cur);
    let ids = this.byNode.get(r.nodeId);
    if (sign > 0) {
      if (!ids) this.byNode.set(r.nodeId, (ids = new Set()));
      ids.add(r.id);
      this.expiries.push(r.expiresMs, r.id);
    } else if (ids?.delete(r.id) && ids.size === 0) this.byNode.delete(r.nodeId);
  }

  private uncount(id: string): void {
    const old = this.state.reservations.get(id);
    if (old) this.count(old, -1);
  }

  /** Ends the reservations whose time is up (the store forgets them on its own). */
  private expire(): void {
    const now = this.clock.now();
    for (let id = this.expiries.popDue(now); id !== undefined; id = this.expiries.popDue(now)) {
      const r = this.state.reservations.get(id);
      if (r && r.expiresMs <= now) this.takeReservation(id);
    }
  }
}

type StatusOf = (node: NodeRecord, drainedBootId: string | undefined) => NodeStatus;

/** Adds `n` ids drawn at random from `from` (all of them when it has no more) to `into`. */
function draw(from: readonly string[], n: number, random: () => number, into: Set<string>): void {
  if (from.length <= n) {
    for (const id of from) into.add(id);
    return;
  }
  for (let i = 0; i < n; i++) into.add(from[Math.floor(random() * from.length)]!);
}

function empty(): State {
  return { nodes: new Map(), drains: new Map(), reservations: new Map(), announced: new Map() };
}

/** A min-heap of (time, id); an id put again or ended meanwhile is checked by the caller. */
class ExpiryQueue {
  private heap: [number, string][] = [];

  clear(): void {
    this.heap = [];
  }

  push(atMs: number, id: string): void {
    const h = this.heap;
    h.push([atMs, id]);
    for (let i = h.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (h[parent]![0] <= h[i]![0]) break;
      [h[parent], h[i]] = [h[i]!, h[parent]!];
      i = parent;
    }
  }

  /** The id of an entry due at `now`, removed; undefined when none is. */
  popDue(now: number): string | undefined {
    const h = this.heap;
    if (!h.length || h[0]![0] > now) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length) {
      h[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && h[l]![0] < h[m]![0]) m = l;
        if (r < h.length && h[r]![0] < h[m]![0]) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i]!, h[m]!];
        i = m;
      }
    }
    return top[1];
  }
}
