import { DomainError } from '@agentenv/common';
import type { ReleasingSandbox, Resources } from '../runtime/index.js';

/** A sandbox about to start on this node: a create, a fork's child or a resume. */
export interface AdmissionRequest {
  readonly kind: 'create' | 'fork' | 'resume';
  /** What it will use; absent for a create whose template is not resolved yet. */
  readonly resources?: Resources;
}

/** What a measure may look at: the sandboxes this node runs and those starting. */
export interface NodeLoad {
  /** Sandboxes whose runtime sandbox is live on this node. */
  readonly live: number;
  /** Starts admitted and not finished yet. */
  readonly starting: number;
  /** Memory (MiB) asked for by the starts in flight: reserved until they finish. */
  readonly startingMemoryMB: number;
  /** Sandboxes stopped whose host resources are still being reclaimed: they hold them until then. */
  readonly releasing: number;
  readonly releasingMemoryMB: number;
}

/**
 * One reason to refuse a start: returns the refusal (a capacity or unavailable error with a
 * Retry-After) or undefined. Measures are synchronous, so a check and the reservation that
 * follows it happen together and a burst of starts cannot all pass one free place.
 */
export interface AdmissionMeasure {
  readonly name: string;
  refuse(req: AdmissionRequest, load: NodeLoad): DomainError | undefined;
}

/** A start admitted; `done()` once it has finished, whatever the outcome. */
export interface AdmissionTicket {
  done(): void;
}

/**
 * Decides whether a sandbox may start now, from pluggable measures, and counts the starts it let
 * through until they finish (so the measures see them).
 */
export class Admission {
  private readonly inFlight = new Set<AdmissionRequest>();

  constructor(
    private readonly measures: readonly AdmissionMeasure[],
    private readonly liveCount: () => number,
    private readonly releasing: () => readonly ReleasingSandbox[] = () => [],
  ) {}

  load(): NodeLoad {
    let memory = 0;
    for (const r of this.inFlight) memory += r.resources?.memoryMB ?? 0;
    const releasing = this.releasing();
    let releasingMemory = 0;
    for (const r of releasing) releasingMemory += r.resources?.memoryMB ?? 0;
    return {
      live: this.liveCount(),
      starting: this.inFlight.size,
      startingMemoryMB: memory,
      releasing: releasing.length,
      releasingMemoryMB: releasingMemory,
    };
  }

  /** Admits `req` or throws the first measure's refusal. */
  admit(req: AdmissionRequest): AdmissionTicket {
    const load = this.load();
    for (const m of this.measures) {
      const refusal = m.refuse(req, load);
      if (refusal) throw refusal;
    }
    this.inFlight.add(req);
    return { done: () => void this.inFlight.delete(req) };
  }

  /** Runs `start` admitted, counting it until it settles. */
  async run<T>(req: AdmissionRequest, start: () => Promise<T>): Promise<T> {
    const ticket = this.admit(req);
    try {
      return await start();
    } finally {
      ticket.done();
    }
  }
}

/** Nothing starts while the node stops. */
export function notWhileStopping(stopping: () => boolean): AdmissionMeasure {
  return {
    name: 'stopping',
    refuse: () => (stopping() ? new DomainError('unavailable', 'the node is shutting down', 5) : undefined),
  };
}

/** At most `max` sandboxes live, starting or still releasing what they held. */
export function maxSandboxes(max: number): AdmissionMeasure {
  return {
    name: 'max_sandboxes',
    refuse: (_req, load) =>
      load.live + load.starting + load.releasing >= max
        ? new DomainError('capacity', `this node runs its maximum of ${max} sandboxes`, 5)
        : undefined,
  };
}

/**
 * Starts beyond a few queued per start slot are refused, so that clients learn it at once
 * instead of timing out in the queue: a capacity refusal (429 with Retry-After), as a full node's.
 */
export function maxStartsInFlight(max: number): AdmissionMeasure {
  return {
    name: 'starts_in_flight',
    refuse: (_req, load) =>
      load.starting >= max
        ? new DomainError('capacity', 'too many sandboxes starting at once; retry shortly', 1)
        : undefined,
  };
}
