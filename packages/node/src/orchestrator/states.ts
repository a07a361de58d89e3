/** Sandbox lifecycle states (ARCHITECTURE.md). Only running and paused are visible to E2B clients. */
export const SANDBOX_STATES = [
  'creating',
  'running',
  'snapshotting',
  'forking',
  'pausing',
  'paused',
  'resuming',
  'killing',
] as const;

export type SandboxState = (typeof SANDBOX_STATES)[number];

export type Operation = 'pause' | 'resume' | 'snapshot' | 'fork' | 'kill';

/** The transition an operation makes: the state it needs, the state while it runs, and after. */
interface Transition {
  from: readonly SandboxState[];
  during: SandboxState;
  after: SandboxState | 'deleted';
}

const TRANSITIONS: Record<Operation, Transition> = {
  pause: { from: ['running'], during: 'pausing', after: 'paused' },
  resume: { from: ['paused'], during: 'resuming', after: 'running' },
  snapshot: { from: ['running'], during: 'snapshotting', after: 'running' },
  fork: { from: ['running'], during: 'forking', after: 'running' },
  kill: { from: ['running', 'paused'], during: 'killing', after: 'deleted' },
};

export function transitionFor(op: Operation): Transition {
  return TRANSITIONS[op];
}

/** States in which work is under way; other operations wait for it to finish. */
export function isTransient(state: SandboxState): boolean {
  return state !== 'running' && state !== 'paused';
}

/** What E2B's list and get report for a state (transient states show where they are heading). */
export function visibleState(state: SandboxState): 'running' | 'paused' {
  return state === 'paused' || state === 'pausing' ? 'paused' : 'running';
}
