import type { StageSample } from './types.js';

/** Nearest-rank percentile of ascending values; NaN for none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export interface LatencySummary {
  count: number;
  p50: number;
  p95: number;
}

/** p50/p95 of the successful `stage` samples that finished at or after `since`. */
export function latency(samples: readonly StageSample[], stage: string, since: number): LatencySummary {
  const ms = samples
    .filter((s) => s.ok && s.stage === stage && s.at >= since)
    .map((s) => s.ms)
    .sort((a, b) => a - b);
  return { count: ms.length, p50: percentile(ms, 50), p95: percentile(ms, 95) };
}

export interface LatencySeries {
  /** Bucket ends, unix seconds (uPlot's x axis). */
  t: number[];
  p50: (number | null)[];
  p95: (number | null)[];
  /** Successful operations per second in each bucket. */
  rate: number[];
}

/**
 * Buckets of `stepMs` ending at `now`, covering `windowMs`: per bucket the p50/p95 of the
 * stage's successful samples (null where there were none) and their rate.
 */
export function latencySeries(
  samples: readonly StageSample[],
  stage: string,
  now: number,
  windowMs: number,
  stepMs: number,
): LatencySeries {
  const n = Math.max(1, Math.ceil(windowMs / stepMs));
  const start = now - n * stepMs;
  const buckets: number[][] = Array.from({ length: n }, () => []);
  for (const s of samples) {
    if (!s.ok || s.stage !== stage || s.at < start || s.at >= now) continue;
    buckets[Math.min(n - 1, Math.floor((s.at - start) / stepMs))]!.push(s.ms);
  }
  const out: LatencySeries = { t: [], p50: [], p95: [], rate: [] };
  buckets.forEach((b, i) => {
    b.sort((x, y) => x - y);
    out.t.push((start + (i + 1) * stepMs) / 1000);
    out.p50.push(b.length ? percentile(b, 50) : null);
    out.p95.push(b.length ? percentile(b, 95) : null);
    out.rate.push(b.length / (stepMs / 1000));
  });
  return out;
}

/** Failed operations by stage since `since`, most frequent first. */
export function errorsByKind(samples: readonly StageSample[], since: number): [string, number][] {
  const c = new Map<string, number>();
  for (const s of samples) if (!s.ok && s.at >= since) c.set(s.stage, (c.get(s.stage) ?? 0) + 1);
  return [...c.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
}
