/**
 * The books a chaos run must balance (pure: what clients were told against what the cluster
 * shows once every fault is healed), so the rules are unit-tested apart from any cluster.
 */

/** What a client was last told of a sandbox: it exists and runs, it is paused, or it killed it. */
export type Told = 'running' | 'paused' | 'killed';

/** What the cluster says of one sandbox after the run, through a gateway. */
export interface Seen {
  /** `GET /sandboxes/{id}`: its state, `absent` for a 404. */
  state: 'running' | 'paused' | 'lost' | 'absent' | 'other';
  /** The reason a `lost` sandbox carries. */
  reason?: string;
  /** Whether it answered a command (running) or resumed and answered one (paused). */
  usable?: boolean;
}

export interface Observation {
  told: ReadonlyMap<string, Told>;
  seen: ReadonlyMap<string, Seen>;
  /** Each node's own listing: sandbox id → state, by node id. */
  nodes: ReadonlyMap<string, ReadonlyMap<string, string>>;
  /** The scheduler's bindings in its store: sandbox id → node id. */
  bindings: ReadonlyMap<string, string>;
  /** Snapshot ids a client was told exist, and whether a sandbox started from each. */
  snapshots: ReadonlyMap<string, boolean>;
}

export interface Violation {
  rule: string;
  id: string;
  detail: string;
}

export interface Verdict {
  violations: Violation[];
  /** Sandboxes lost with an infrastructure reason (a documented loss, not a violation). */
  lost: number;
  counts: Record<Told, number>;
}

/**
 * A loss the platform documents: its node failed (the scheduler's `node failure`, or the node's own
 * `node_restart` when it came back without the sandbox's processes), or the node was gone for good
 * before a pause was stored.
 */
export const INFRA_LOSS = /node failure|node_restart|node .* (gone|lost)|not yet stored|never stored/i;

export function judge(o: Observation): Verdict {
  const violations: Violation[] = [];
  const flag = (rule: string, id: string, detail: string) => violations.push({ rule, id, detail });
  let lost = 0;
  const counts: Record<Told, number> = { running: 0, paused: 0, killed: 0 };

  const holders = new Map<string, string[]>();
  for (const [node, list] of o.nodes)
    for (const [id, state] of list)
      if (state === 'running') holders.set(id, [...(holders.get(id) ?? []), node]);
  for (const [id, nodes] of holders)
    if (nodes.length > 1) flag('one-running-copy', id, `running on ${nodes.join(' and ')}`);

  for (const [id, told] of o.told) {
    counts[told]++;
    const seen = o.seen.get(id) ?? { state: 'absent' };
    if (seen.state === 'lost') {
      if (told === 'killed' || INFRA_LOSS.test(seen.reason ?? '')) lost += told === 'killed' ? 0 : 1;
      else flag('lost-with-reason', id, `lost without an infrastructure reason: ${seen.reason ?? '(none)'}`);
      continue;
    }
    if (told === 'killed') {
      if (seen.state !== 'absent') flag('killed-stays-killed', id, `killed by its client, now ${seen.state}`);
      continue;
    }
    if (seen.state === 'absent' || seen.state === 'other') {
      flag('told-exists', id, `told ${told}, the cluster says ${seen.state}`);
      continue;
    }
    // A paused sandbox may have been resumed by traffic; a running one paused by its node's stop.
    if (!seen.usable) flag('usable', id, `${seen.state} but it did not answer a command`);
  }

  for (const [node, list] of o.nodes)
    for (const [id, state] of list) {
      if (state !== 'running' && state !== 'paused') continue;
      const bound = o.bindings.get(id);
      if (bound !== undefined && bound !== node && state === 'running')
        flag('store-matches-rosters', id, `runs on ${node}, the store binds it to ${bound}`);
      if (bound === undefined)
        flag('store-matches-rosters', id, `${state} on ${node}, no binding in the store`);
    }

  for (const [id, started] of o.snapshots)
    if (!started) flag('snapshot-starts', id, 'no sandbox could start from this snapshot');

  return { violations, lost, counts };
}
