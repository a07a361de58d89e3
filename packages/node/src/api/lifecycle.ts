import { invalid } from '@agentenv/common';

/** The lifecycle fields of a create body, as E2B's SDK sends them (absent when not set). */
export interface LifecycleBody {
  autoPause?: boolean;
  autoPauseMemory?: boolean;
  autoResume?: { enabled: boolean };
}

/** What a sandbox does at its end time, and whether proxied traffic wakes it when paused. */
export interface Lifecycle {
  /** TTL expiry pauses (true) or kills (false). */
  autoPause: boolean;
  /** The TTL pause keeps memory (true) or the filesystem only (false). */
  autoPauseMemory: boolean;
  autoResume: boolean;
}

/**
 * A create body's lifecycle, refusing what cannot happen. Absent `autoPause` means pause here
 * (E2B-COMPAT.md §2), so `autoResume` alone is valid; E2B's SDK omits `autoPause` when the
 * caller gave no lifecycle.
 */
export function parseLifecycle(body: LifecycleBody): Lifecycle {
  const autoPause = body.autoPause ?? true;
  const autoPauseMemory = body.autoPauseMemory ?? true;
  const autoResume = body.autoResume?.enabled ?? false;
  if (!autoPauseMemory && !autoPause)
    throw invalid('autoPauseMemory=false only applies when autoPause is true.');
  if (!autoPauseMemory && autoResume)
    throw invalid(
      'autoPauseMemory=false (filesystem-only auto-pause) cannot be combined with autoResume: ' +
        'a filesystem-only snapshot cannot be auto-resumed by traffic and must be resumed explicitly.',
    );
  if (autoResume && !autoPause)
    throw invalid('autoResume can only be true when the sandbox pauses on timeout (autoPause: true)');
  return { autoPause, autoPauseMemory, autoResume };
}
