import type { Clock } from './clock.js';
import { withAnnounced } from './captures.js';
import {
  NO_RESERVATION,
  type AnnouncedCapture,
  type NodeRecord,
  type NodeStatus,
  type Reservation,
  type Reserved,
} from './model.js';
import type { Candidate } from './placement/candidate.js';
import { announcedId, type SchedulerStore } from './store/store.js';

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
 * `refreshMs`, in the background, so a replica counts another's reservations that much later. A
 * reload replays the changes made while it read, so a write is never lost to a read begun before it.
 */
export class NodeIndex {
  private state: State = empty();
  private reserved = new Map<string, Reserved>();
  /** Reservation ids per node. */
  private byNode = new Map<string, Set<string>>();
  private readonly expiries = new ExpiryQueue();
  private loadedMs: number | undefined;
  private loading: Promise<void> | undefined;
  private during: Change[] | undefined;

  constructor(
    private readonly store: SchedulerStore,
    private readonly clock: Clock,
    private readonly refreshMs: number,
  ) {}

  /** Loaded the first time (a failing store fails the caller); later reloaded in the background. */
  async ready(): Promise<void> {
    if (this.loadedMs === undefined) return this.reload();
    if (this.clock.now() - this.loadedMs >= this.refreshMs) void this.reload().catch(() => undefined);
  }

  private reload(): Promise<void> {
    this.loading ??= (async () => {
      const changes: Change[] = (this.during = []);
      const startedMs = this.clock.now();
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
        for (const c of changes) c(next);
        this.state = next;
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
    this.change((s) => s.nodes.set(node.nodeId, node));
  }

  putDrain(nodeId: string, bootId: string): void {
    this.change((s) => s.drains.set(nodeId, bootId));
  }

  putReservations(rs: readonly Reservation[]): void {
    for (const r of rs) {
      this.uncount(r.id);
      this.count(r, 1);
    }
    this.change((s) => rs.forEach((r) => s.reservations.set(r.id, r)));
  }

  /** Ends a reservation here; the store's own take decides who got it. */
  takeReservation(id: string): void {
    this.uncount(id);
    this.change((s) => s.reservations.delete(id));
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

  /** Every node as placement sees it now: with its announced captures, its status and what is reserved. */
  candidates(statusOf: (node: NodeRecord, drainedBootId: string | undefined) => NodeStatus): Candidate[] {
    this.expire();
    const announced = this.state.announced.size ? this.announced() : [];
    const out: Candidate[] = [];
    for (const node of this.state.nodes.values())
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
