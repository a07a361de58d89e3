/**
 * The runtime-cache keys of captures: what a node advertises in its heartbeats for each capture it
 * holds, and what the scheduler looks for when it places a start. Both sides build them here, so
 * a capture named by id or by any of its names matches.
 */
export const captureKey = {
  /** A built template's ready state, by template id or by any of its names. */
  template: (idOrName: string) => `template/${idOrName}`,
  /** A snapshot, by snapshot id or by any of its names. */
  snapshot: (idOrName: string) => `snapshot/${idOrName}`,
  /** A paused sandbox's capture, by pause id. */
  pause: (pauseId: string) => `pause/${pauseId}`,
};

/** What a start names: a create's template (which may be a snapshot), a snapshot, a pause. */
export interface StartSource {
  templateId?: string;
  snapshotId?: string;
  pauseId?: string;
}

/**
 * The keys of the captures a start may restore. A create's `templateID` may name a built template
 * or a snapshot (E2B's `Sandbox.create(snapshotId)`), so it is looked for as both.
 */
export function startCacheKeys(s: StartSource): string[] {
  const keys = new Set<string>();
  if (s.templateId) keys.add(captureKey.template(s.templateId)).add(captureKey.snapshot(s.templateId));
  if (s.snapshotId) keys.add(captureKey.snapshot(s.snapshotId));
  if (s.pauseId) keys.add(captureKey.pause(s.pauseId));
  return [...keys];
}
