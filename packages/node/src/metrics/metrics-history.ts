import type { Logger } from 'pino';
import type { UsageSample } from '../orchestrator/index.js';

const FIELDS = 8;

/** A fixed-size ring of samples in one typed array (8 numbers a sample, no objects kept). */
class SampleRing {
  private readonly data: Float64Array;
  private next = 0;
  private size = 0;

  constructor(private readonly capacity: number) {
    this.data = new Float64Array(capacity * FIELDS);
  }

  push(s: UsageSample): void {
    // Samples arrive in time order; one that is not newer than the last replaces nothing.
    if (this.size && s.ts <= this.data[((this.next - 1 + this.capacity) % this.capacity) * FIELDS]!) return;
    this.data.set(
      [s.ts, s.cpuCount, s.cpuUsedPct, s.memUsed, s.memTotal, s.memCache, s.diskUsed, s.diskTotal],
      this.next * FIELDS,
    );
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
  }

  all(): UsageSample[] {
    const out: UsageSample[] = [];
    for (let i = 0; i < this.size; i++) {
      const o = ((this.next - this.size + i + this.capacity) % this.capacity) * FIELDS;
      const d = this.data;
      out.push({
        ts: d[o]!,
        cpuCount: d[o + 1]!,
        cpuUsedPct: d[o + 2]!,
        memUsed: d[o + 3]!,
        memTotal: d[o + 4]!,
        memCache: d[o + 5]!,
        diskUsed: d[o + 6]!,
        diskTotal: d[o + 7]!,
      });
    }
    return out;
  }
}

/**
 * The recent usage samples of every sandbox on the node, in memory: at most `capacity` per
 * sandbox (64 bytes each), older ones overwritten. A sandbox's history goes when it does.
 */
export class MetricsHistory {
  private readonly rings = new Map<string, SampleRing>();

  constructor(readonly capacity: number) {}

  record(id: string, sample: UsageSample): void {
    let r = this.rings.get(id);
    if (!r) this.rings.set(id, (r = new SampleRing(this.capacity)));
    r.push(sample);
  }

  /** Oldest first. */
  samples(id: string): UsageSample[] {
    return this.rings.get(id)?.all() ?? [];
  }

  latest(id: string): UsageSample | undefined {
    return this.samples(id).at(-1);
  }

  /** Forgets every sandbox not in `keep`. */
  retain(keep: ReadonlySet<string>): void {
    for (const id of this.rings.keys()) if (!keep.has(id)) this.rings.delete(id);
  }
}

/** Where the sampler finds sandboxes and their usage. */
export interface UsageSource {
  /** Every sandbox the node knows (running or not): the others' histories are forgotten. */
  known(): Iterable<{ sandboxId: string; running: boolean }>;
  /** A fresh sample; undefined when the sandbox is no longer running. */
  sample(id: string): Promise<UsageSample | undefined>;
}

export interface MetricsSamplerOptions {
  source: UsageSource;
  history: MetricsHistory;
  intervalMs: number;
  logger: Logger;
  /**
   * Sandboxes not to sample even though running (a frozen one would be woken by the request).
   * They keep their history; their metrics show a gap.
   */
  skip?: (id: string) => boolean;
  /** Samples taken at once; the rest wait (envd answers /metrics in a few ms). */
  concurrency?: number;
}

/** Samples every running sandbox's usage into the history, every `intervalMs`. */
export class MetricsSampler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly o: MetricsSamplerOptions) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      // A tick still under way (a slow machine) makes the next one wait for the one after.
      this.running ??= this.tick().finally(() => (this.running = undefined));
    }, this.o.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One round: samples the running sandboxes, forgets the ones that are gone. */
  async tick(): Promise<void> {
    const known = [...this.o.source.known()];
    this.o.history.retain(new Set(known.map((k) => k.sandboxId)));
    const due = known.filter((k) => k.running && !this.o.skip?.(k.sandboxId)).map((k) => k.sandboxId);
    const workers = Array.from({ length: Math.min(this.o.concurrency ?? 4, due.length) }, async () => {
      for (let id = due.shift(); id !== undefined; id = due.shift()) await this.sampleOne(id);
    });
    await Promise.all(workers);
  }

  /** Samples one sandbox now and keeps the sample (also used when a request finds no history). */
  async sampleOne(id: string): Promise<UsageSample | undefined> {
    try {
      const s = await this.o.source.sample(id);
      if (s) this.o.history.record(id, s);
      return s;
    } catch (err) {
      // Paused or killed between listing and sampling, or envd busy: the next round tries again.
      this.o.logger.debug({ err, sandboxId: id }, 'metrics sample failed');
      return undefined;
    }
  }
}
