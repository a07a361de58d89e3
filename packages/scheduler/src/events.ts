import { randomBytes } from 'node:crypto';
import type { Clock } from './clock.js';
import { invalid, DomainError } from '@agentenv/common';
import type { SandboxEvent, SandboxEventType } from './model.js';
import type { SchedulerStore } from './store/store.js';

export interface EventInput {
  eventId?: string;
  sandboxId: string;
  nodeId: string;
  type: SandboxEventType;
  reason: string;
  timeMs?: number;
  details: Record<string, string>;
}

export interface EventFilter {
  sandboxId?: string;
  nodeId?: string;
}

const MAX_PER_REPORT = 1000;
const MAX_LIMIT = 1000;
const DEFAULT_LIMIT = 100;
const MAX_TEXT = 1024;
/** Events a watcher may fall behind by before its stream ends (it can reconnect and list). */
const WATCH_BUFFER = 1000;

/** Sandbox lifecycle events: recorded per sandbox (bounded) and streamed cluster-wide. */
export class EventLog {
  constructor(
    private readonly store: SchedulerStore,
    private readonly clock: Clock,
  ) {}

  async report(events: readonly EventInput[]): Promise<void> {
    if (events.length > MAX_PER_REPORT) throw invalid(`invalid events: at most ${MAX_PER_REPORT} per call`);
    for (const e of events) checkEvent(e);
    for (const e of events) await this.record(e);
  }

  async record(e: EventInput): Promise<SandboxEvent> {
    const timeMs = e.timeMs || this.clock.now();
    const event: SandboxEvent = {
      eventId: e.eventId || `${timeMs.toString(36)}-${randomBytes(6).toString('hex')}`,
      sandboxId: e.sandboxId,
      nodeId: e.nodeId,
      type: e.type,
      reason: e.reason,
      timeMs,
      details: e.details,
    };
    await this.store.appendEvent(event);
    return event;
  }

  async list(sandboxId: string, limit = 0): Promise<SandboxEvent[]> {
    if (!sandboxId) throw invalid('invalid sandbox_id: required');
    if (limit < 0 || limit > MAX_LIMIT) throw invalid(`invalid limit: 1 to ${MAX_LIMIT}`);
    return this.store.listEvents(sandboxId, limit || DEFAULT_LIMIT);
  }

  /** Events matching `filter` from now on, until `signal` aborts. */
  async *watch(filter: EventFilter, signal: AbortSignal): AsyncGenerator<SandboxEvent> {
    const queue: SandboxEvent[] = [];
    let wake: (() => void) | undefined;
    let overflow = false;
    const off = this.store.subscribeEvents((e) => {
      if (filter.sandboxId && e.sandboxId !== filter.sandboxId) return;
      if (filter.nodeId && e.nodeId !== filter.nodeId) return;
      if (queue.length >= WATCH_BUFFER) overflow = true;
      else queue.push(e);
      wake?.();
    });
    const onAbort = () => wake?.();
    signal.addEventListener('abort', onAbort);
    try {
      while (!signal.aborted) {
        if (overflow)
          throw new DomainError('capacity', `event watcher fell ${WATCH_BUFFER} events behind; reconnect`);
        const next = queue.shift();
        if (next) {
          yield next;
          continue;
        }
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
    } finally {
      off();
      signal.removeEventListener('abort', onAbort);
    }
  }
}

function checkEvent(e: EventInput): void {
  if (!e.sandboxId || e.sandboxId.length > 256)
    throw invalid('invalid event: sandbox_id required (at most 256 characters)');
  if (!e.nodeId) throw invalid('invalid event: node_id required');
  if (e.reason.length > MAX_TEXT) throw invalid(`invalid event: reason longer than ${MAX_TEXT}`);
  const details = Object.entries(e.details);
  if (details.length > 32 || details.some(([k, v]) => k.length > 64 || v.length > MAX_TEXT))
    throw invalid('invalid event: at most 32 details, keys up to 64 and values up to 1024 characters');
}
