import type { StageSample } from '../shared/types.js';
import { WINDOW_MS } from '../shared/window.js';

export { WINDOW_MS };
/** At most this many samples are kept: a busy node sheds its oldest first. */
const MAX_SAMPLES = 20_000;

export type Clock = () => number;

/**
 * Recent lifecycle operations of one node, for the overview's latency charts and error counts.
 * Its `stage`/`failed` methods match the orchestrator's LifecycleObserver, so the node reports
 * to it beside its Prometheus metrics. Listeners get each sample as it happens.
 */
export class LifecycleActivity {
  private samples: StageSample[] = [];
  private readonly listeners = new Set<(s: StageSample) => void>();

  constructor(
    private readonly nodeID: string,
    private readonly now: Clock = Date.now,
  ) {}

  stage(name: string, ms: number): void {
    this.add({ stage: name, at: this.now(), ms, ok: true, nodeID: this.nodeID });
  }

  failed(name: string): void {
    this.add({ stage: name, at: this.now(), ms: 0, ok: false, nodeID: this.nodeID });
  }

  /** Samples of the last WINDOW_MS, oldest first. */
  recent(): StageSample[] {
    this.prune();
    return [...this.samples];
  }

  /** Calls `fn` with every new sample until the returned function is called. */
  subscribe(fn: (s: StageSample) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private add(s: StageSample): void {
    this.samples.push(s);
    this.prune();
    for (const fn of this.listeners) fn(s);
  }

  private prune(): void {
    const since = this.now() - WINDOW_MS;
    let drop = 0;
    while (drop < this.samples.length && this.samples[drop]!.at < since) drop++;
    drop = Math.max(drop, this.samples.length - MAX_SAMPLES);
    if (drop > 0) this.samples = this.samples.slice(drop);
  }
}
