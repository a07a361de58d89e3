import type { Binding, RosterEntry } from '../model.js';

export interface RosterTiming {
  now: number;
  /**
   * An assignment younger than this survives a roster that lacks it: the heartbeat may have
   * been built before the start finished.
   */
  assignmentGraceMs: number;
  /** A binding unchanged for this long is written again so that it does not expire. */
  refreshAfterMs: number;
}

export interface RosterChanges {
  put: Binding[];
  remove: string[];
  /** Listed sandboxes the cluster declared lost: they stay lost, and the node is to stop them. */
  fenced: string[];
}

/** States in which a sandbox is not using its node (its state is in the shared repository). */
const atRest = (b: Binding) => b.state === 'paused' || b.state === 'lost';

/**
 * Bindings to write and drop after a node's heartbeat, given the bindings now stored for the
 * roster's sandboxes and for those bound to the node. The roster is the source of truth for the
 * node's own sandboxes, with these exceptions: a paused entry does not take a sandbox back from
 * another node that runs it (the sandbox was resumed there and this node has not noticed yet);
 * sandboxes declared lost stay so until their binding expires, even when the node comes back
 * listing them (clients were told they are gone: they are fenced, and the node stops them); and a
 * pause the gateway just recorded is not undone by a roster that may predate it.
 */
export function reconcileRoster(
  nodeId: string,
  roster: readonly RosterEntry[],
  current: ReadonlyMap<string, Binding>,
  t: RosterTiming,
): RosterChanges {
  const put: Binding[] = [];
  const fenced: string[] = [];
  const listed = new Set<string>();
  for (const e of roster) {
    listed.add(e.sandboxId);
    const b = current.get(e.sandboxId);
    if (b?.state === 'lost' && b.nodeId === nodeId) {
      fenced.push(e.sandboxId);
      continue;
    }
    if (b && b.nodeId !== nodeId && !atRest(b) && e.state === 'paused') continue;
    // (A paused entry with the pause the binding names already is older than the recorded one.)
    if (b && recordedPause(b, nodeId, t) && (e.state !== 'paused' || e.pauseId === b.pauseId)) continue;
    const next: Binding = {
      sandboxId: e.sandboxId,
      nodeId,
      state: e.state,
      templateId: e.templateId,
      ...(e.pauseId ? { pauseId: e.pauseId } : {}),
      cpuCount: e.cpuCount,
      memoryMib: e.memoryMib,
      ...(e.pauseLocalOnly ? { pauseLocalOnly: true as const } : {}),
      source: 'roster',
      updatedMs: t.now,
    };
    if (!b || changed(b, next) || t.now - b.updatedMs >= t.refreshAfterMs) put.push(next);
  }
  const remove: string[] = [];
  for (const b of current.values()) {
    if (b.nodeId !== nodeId || listed.has(b.sandboxId)) continue;
    if (b.source === 'assignment' && t.now - b.updatedMs < t.assignmentGraceMs) continue;
    // A lost sandbox stays visible as lost until its binding expires.
    if (b.state === 'lost') continue;
    remove.push(b.sandboxId);
  }
  return { put, remove, fenced };
}

/**
 * A pause the gateway recorded (RecordPause) outlives a roster that still shows the sandbox
 * running or pausing for as long as an assignment does: that heartbeat may have been built before
 * the pause ended.
 */
function recordedPause(b: Binding, nodeId: string, t: RosterTiming): boolean {
  return (
    b.source === 'assignment' &&
    b.state === 'paused' &&
    b.nodeId === nodeId &&
    t.now - b.updatedMs < t.assignmentGraceMs
  );
}

function changed(a: Binding, b: Binding): boolean {
  return (
    a.nodeId !== b.nodeId ||
    a.state !== b.state ||
    a.pauseId !== b.pauseId ||
    a.templateId !== b.templateId ||
    a.source !== b.source ||
    a.cpuCount !== b.cpuCount ||
    a.memoryMib !== b.memoryMib ||
    a.pauseLocalOnly !== b.pauseLocalOnly
  );
}
