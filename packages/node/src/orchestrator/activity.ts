import type { Clock } from '../util/index.js';

interface Activity {
  /** When the last request began or the last open one ended (the clock's ms). */
  last: number;
  /** Requests still open: streams, command output, WebSockets. */
  open: number;
}

/**
 * What each sandbox's clients are doing, as the proxy sees it: when traffic last reached the
 * sandbox and how many requests into it are still open (a running command streams its output
 * through one). Idle policies decide from it; a sandbox with an open request is never idle.
 */
export class ActivityTracker {
  private readonly sandboxes = new Map<string, Activity>();

  constructor(private readonly clock: Clock) {}

  /** A request into the sandbox began; call the returned function once when it ends. */
  begin(sandboxId: string): () => void {
    const a = this.entry(sandboxId);
    a.open++;
    a.last = this.clock.now();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const cur = this.sandboxes.get(sandboxId);
      if (cur !== a) return;
      a.open--;
      a.last = this.clock.now();
    };
  }

  /** Something happened in the sandbox's life that counts as use (created, resumed, a call). */
  touch(sandboxId: string): void {
    this.entry(sandboxId).last = this.clock.now();
  }

  /** Requests open now. */
  openRequests(sandboxId: string): number {
    return this.sandboxes.get(sandboxId)?.open ?? 0;
  }

  /** Milliseconds without traffic: 0 while a request is open, undefined for an unknown sandbox. */
  idleFor(sandboxId: string): number | undefined {
    const a = this.sandboxes.get(sandboxId);
    if (!a) return undefined;
    return a.open > 0 ? 0 : this.clock.now() - a.last;
  }

  /**
   * When its current stretch without traffic began (the clock's ms): undefined while a request is
   * open or for an unknown sandbox. Two looks in one stretch see the same value.
   */
  quietSince(sandboxId: string): number | undefined {
    const a = this.sandboxes.get(sandboxId);
    return a && a.open === 0 ? a.last : undefined;
  }

  /** The sandbox is gone from this node. */
  forget(sandboxId: string): void {
    this.sandboxes.delete(sandboxId);
  }

  private entry(sandboxId: string): Activity {
    let a = this.sandboxes.get(sandboxId);
    if (!a) this.sandboxes.set(sandboxId, (a = { last: this.clock.now(), open: 0 }));
    return a;
  }
}
