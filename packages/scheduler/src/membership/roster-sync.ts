import type { Binding, RosterEntry } from '../model.js';
import { reconcileRoster, type RosterChanges } from './roster.js';
import type { SchedulerSettings } from '../settings.js';
import type { SchedulerStore } from '../store/store.js';

/** What this process last reconciled of a node's roster. */
interface Seen {
  /** Each listed sandbox's entry, as `entryKey` gives it. */
  entries: Map<string, string>;
  /** When all of the node's bindings were last read and refreshed. */
  fullMs: number;
}

/** What of an entry its binding mirrors: the same key, nothing to write. */
const entryKey = (e: RosterEntry) =>
  `${e.state}\n${e.pauseId ?? ''}\n${e.pauseLocalOnly === true}\n${e.templateId}\n${e.cpuCount}\n${e.memoryMib}`;

/**
 * Brings the stored bindings in line with each node's roster. A node sends its whole roster with
 * every heartbeat, and a busy node's changes by a few sandboxes between two of them: the bindings
 * of the entries that changed since the roster this process last reconciled, of the sandboxes it
 * no longer lists and of those this process assigned to it meanwhile are read and written; the
 * node's other bindings stand. All of them are read and refreshed (`reconcileRoster` on the whole
 * roster and the node's binding index) on the first heartbeat this process sees of a node, after
 * a silence, and once every third of a binding's lifetime, so a change another replica made to a
 * binding (a sandbox the failure sweep marked lost, an assignment it recorded, a store that lost
 * its keys) is set right within that time.
 */
export class RosterSync {
  private readonly seen = new Map<string, Seen>();
  private readonly assigned = new Map<string, Set<string>>();
  /** The heartbeat time this process last recorded for each node. */
  private readonly heardHere = new Map<string, number>();

  constructor(
    private readonly store: SchedulerStore,
    private readonly settings: SchedulerSettings,
  ) {}

  /** Sandboxes this process assigned to a node: its next rosters look at them until they list them. */
  assignedTo(nodeId: string, sandboxIds: readonly string[]): void {
    let ids = this.assigned.get(nodeId);
    if (!ids) this.assigned.set(nodeId, (ids = new Set()));
    for (const id of sandboxIds) ids.add(id);
  }

  /** Records the heartbeat time this process wrote for a node. */
  heard(nodeId: string, ms: number): void {
    this.heardHere.set(nodeId, ms);
  }

  /**
   * Whether the node's last recorded heartbeat is one this process heard: when another replica
   * heard it since, what this process saw of its roster is old, and the next sync reads it whole.
   */
  heardLastHere(nodeId: string, lastHeartbeatMs: number | undefined): boolean {
    return lastHeartbeatMs !== undefined && this.heardHere.get(nodeId) === lastHeartbeatMs;
  }

  /**
   * Bindings of a node's sandboxes written from elsewhere (a pause the gateway recorded from the
   * node's answer, which can land after a heartbeat that said the pause is stored since): the
   * node's next roster is reconciled with them even when its entries did not change.
   */
  recheck(nodeId: string, sandboxIds: readonly string[]): void {
    const seen = this.seen.get(nodeId);
    // No key matches '': listed, the entry counts as changed; not listed, as gone.
    if (seen) for (const id of sandboxIds) seen.entries.set(id, '');
  }

  /**
   * @param continued whether the node's previous heartbeat, of the same boot, was heard recently
   * @returns the listed sandboxes the node is to stop (see reconcileRoster)
   */
  async sync(
    nodeId: string,
    roster: readonly RosterEntry[],
    now: number,
    continued: boolean,
  ): Promise<string[]> {
    const seen = this.seen.get(nodeId);
    const back = this.store.reconnectedAtMs();
    const full =
      !continued ||
      !seen ||
      now - seen.fullMs >= this.refreshAfterMs ||
      // What this process wrote before the store came back may not be in it any more.
      (back !== undefined && back >= seen.fullMs);
    const changes = full
      ? await this.whole(nodeId, roster, now)
      : await this.delta(nodeId, roster, seen, now);
    // The bindings written and those dropped are different sandboxes.
    await Promise.all([
      this.store.putBindings(changes.put, this.settings.bindingTtlMs),
      this.store.deleteBindings(changes.remove, nodeId),
    ]);
    const ids = this.assigned.get(nodeId);
    const listed = new Map(roster.map((e) => [e.sandboxId, entryKey(e)]));
    if (ids) {
      for (const id of ids) if (full || listed.has(id) || changes.remove.includes(id)) ids.delete(id);
      if (ids.size === 0) this.assigned.delete(nodeId);
    }
    // Looked at again with every roster that still lists them, until the node has stopped them.
    for (const id of changes.fenced) listed.set(id, '');
    this.seen.set(nodeId, { entries: listed, fullMs: full ? now : seen!.fullMs });
    return changes.fenced;
  }

  private get refreshAfterMs(): number {
    return this.settings.bindingTtlMs / 3;
  }

  private timing(now: number) {
    return {
      now,
      assignmentGraceMs: 2 * this.settings.heartbeatIntervalMs,
      refreshAfterMs: this.refreshAfterMs,
    };
  }

  private async whole(nodeId: string, roster: readonly RosterEntry[], now: number): Promise<RosterChanges> {
    const [current, bound] = await Promise.all([
      this.store.getBindings(roster.map((e) => e.sandboxId)),
      this.store.nodeBindings(nodeId),
    ]);
    for (const b of bound) current.set(b.sandboxId, b);
    return reconcileRoster(nodeId, roster, current, this.timing(now));
  }

  /**
   * The changes of the entries that differ from what was seen, of the sandboxes no longer listed
   * and of those assigned here that the roster does not list: `reconcileRoster` on those alone
   * (every binding it is given that the partial roster lacks is one the node no longer lists).
   */
  private async delta(
    nodeId: string,
    roster: readonly RosterEntry[],
    seen: Seen,
    now: number,
  ): Promise<RosterChanges> {
    const changed = roster.filter((e) => seen.entries.get(e.sandboxId) !== entryKey(e));
    const listed = new Set(roster.map((e) => e.sandboxId));
    const gone = [...seen.entries.keys()].filter((id) => !listed.has(id));
    const assigned = [...(this.assigned.get(nodeId) ?? [])].filter((id) => !listed.has(id));
    const ids = [...changed.map((e) => e.sandboxId), ...new Set([...gone, ...assigned])];
    if (ids.length === 0) return { put: [], remove: [], fenced: [] };
    const current: Map<string, Binding> = await this.store.getBindings(ids);
    return reconcileRoster(nodeId, changed, current, this.timing(now));
  }
}
