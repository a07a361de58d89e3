import type { SandboxEvent } from '../shared/types.js';
import { diffSandboxes, type SeenSandbox } from './changes.js';

/** How often the watcher looks while someone listens: well inside the 2 s a new sandbox may take to show. */
const LOOK_MS = 500;
/** Events kept per sandbox for its detail page, and sandboxes remembered after they are gone. */
const PER_SANDBOX = 50;
const GONE_KEPT = 500;

/**
 * Turns a node's sandbox records into lifecycle events by looking at them twice a second: every
 * state a sandbox settles in shows up, whichever path (an API call, the TTL loop, a restart) took
 * it there; a state held for less than a look may be missed. Keeps each sandbox's recent events
 * for its detail page. The first look only learns what exists.
 */
export class SandboxWatcher {
  private seen = new Map<string, SeenSandbox>();
  private readonly history = new Map<string, SandboxEvent[]>();
  private readonly listeners = new Set<(e: SandboxEvent) => void>();
  private timer: NodeJS.Timeout | undefined;
  private primed = false;

  constructor(
    private readonly list: () => Iterable<{ sandboxId: string; state: string; templateId: string }>,
    private readonly nodeID: string,
    private readonly onError: (err: unknown) => void = () => undefined,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Looks once now: emits what changed since the last look. */
  look(): void {
    const next = new Map<string, SeenSandbox>();
    for (const r of this.list()) next.set(r.sandboxId, { state: r.state, templateID: r.templateId });
    const events = this.primed ? diffSandboxes(this.seen, next, this.nodeID, this.now().toISOString()) : [];
    this.seen = next;
    this.primed = true;
    for (const e of events) {
      this.remember(e);
      for (const fn of this.listeners) fn(e);
    }
  }

  /** The recent events of one sandbox, oldest first. */
  events(sandboxID: string): SandboxEvent[] {
    this.look();
    return [...(this.history.get(sandboxID) ?? [])];
  }

  subscribe(fn: (e: SandboxEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  start(): void {
    if (this.timer) return;
    this.look();
    this.timer = setInterval(() => {
      try {
        this.look();
      } catch (err) {
        this.onError(err);
      }
    }, LOOK_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private remember(e: SandboxEvent): void {
    const list = this.history.get(e.sandboxID) ?? [];
    list.push(e);
    if (list.length > PER_SANDBOX) list.shift();
    this.history.delete(e.sandboxID);
    this.history.set(e.sandboxID, list);
    // Map order is insertion order: the first entries are the sandboxes heard of longest ago.
    if (this.history.size > this.seen.size + GONE_KEPT) {
      for (const id of this.history.keys()) {
        if (this.history.size <= this.seen.size + GONE_KEPT) break;
        if (!this.seen.has(id)) this.history.delete(id);
      }
    }
  }
}
