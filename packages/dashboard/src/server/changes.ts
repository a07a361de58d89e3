import type { SandboxEvent } from '../shared/types.js';

/** What the watcher remembers of a sandbox between two looks. */
export interface SeenSandbox {
  state: string;
  templateID: string;
}

/** The event name for a move from `before` (undefined: new) to `after` (undefined: gone). */
export function eventType(before: string | undefined, after: string | undefined): string {
  if (before === undefined) return 'created';
  if (after === undefined) return 'killed';
  if (after === 'paused') return 'paused';
  if (after === 'running') {
    if (before === 'resuming' || before === 'paused') return 'resumed';
    if (before === 'snapshotting') return 'snapshot';
    if (before === 'forking') return 'forked';
    if (before === 'creating') return 'started';
  }
  return 'state';
}

/**
 * The lifecycle events between two looks at a node's sandboxes (id → state and template), in a
 * stable order: new and changed ones in `next`'s order, then the ones that are gone.
 */
export function diffSandboxes(
  prev: ReadonlyMap<string, SeenSandbox>,
  next: ReadonlyMap<string, SeenSandbox>,
  nodeID: string,
  timestamp: string,
): SandboxEvent[] {
  const out: SandboxEvent[] = [];
  const event = (id: string, before: string | undefined, s: SeenSandbox | undefined, templateID: string) =>
    out.push({
      sandboxID: id,
      nodeID,
      type: eventType(before, s?.state),
      ...(s ? { state: s.state } : {}),
      templateID,
      timestamp,
    });
  for (const [id, s] of next) {
    const before = prev.get(id);
    if (before?.state !== s.state) event(id, before?.state, s, s.templateID);
  }
  for (const [id, s] of prev) if (!next.has(id)) event(id, s.state, undefined, s.templateID);
  return out;
}
