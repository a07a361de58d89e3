import { invalid } from '@agentenv/common';
import type { UsageSample } from '../orchestrator/index.js';

/**
 * `GET /sandboxes/{id}/metrics?start&end`: which samples, and in which buckets. E2B answers
 * with one point per step, the step growing with the range so a range never has more than
 * about a thousand points.
 */

/** Bucket width in seconds for a range of `seconds` (E2B's steps). */
export function metricsStep(seconds: number): number {
  const h = 3600;
  if (seconds < h) return 5;
  if (seconds < 6 * h) return 30;
  if (seconds < 12 * h) return 60;
  if (seconds < 24 * h) return 120;
  if (seconds < 7 * 24 * h) return 300;
  return 900;
}

/**
 * The range to answer, in unix seconds: what was asked, within the sandbox's life (from its
 * start to now). undefined when the asked range lies entirely outside it.
 */
export function metricsRange(
  asked: { start?: number; end?: number },
  life: { startedAt: number; now: number },
): { start: number; end: number } | undefined {
  if (asked.start !== undefined && asked.end !== undefined && asked.start > asked.end)
    throw invalid('start time cannot be after end time');
  const start = Math.max(asked.start ?? life.startedAt, life.startedAt);
  const end = Math.min(asked.end ?? life.now, life.now);
  return start <= end ? { start, end } : undefined;
}

/**
 * Samples inside [start, end], one point per step-wide bucket starting at `start` (so no point
 * is stamped before the range): CPU averaged, used memory and disk at their highest, totals as
 * last seen.
 */
export function bucketSamples(
  samples: readonly UsageSample[],
  range: { start: number; end: number },
): UsageSample[] {
  const step = metricsStep(range.end - range.start);
  const buckets = new Map<number, UsageSample[]>();
  for (const s of samples) {
    if (s.ts < range.start || s.ts > range.end) continue;
    const at = range.start + Math.floor((s.ts - range.start) / step) * step;
    const b = buckets.get(at);
    if (b) b.push(s);
    else buckets.set(at, [s]);
  }
  return [...buckets.entries()]
    .sort(([a], [b]) => a - b)
    .map(([ts, b]) => {
      const last = b[b.length - 1]!;
      const max = (f: (s: UsageSample) => number) => Math.max(...b.map(f));
      return {
        ts,
        cpuCount: last.cpuCount,
        cpuUsedPct: Math.round((b.reduce((n, s) => n + s.cpuUsedPct, 0) / b.length) * 100) / 100,
        memUsed: max((s) => s.memUsed),
        memTotal: last.memTotal,
        memCache: max((s) => s.memCache),
        diskUsed: max((s) => s.diskUsed),
        diskTotal: last.diskTotal,
      };
    });
}

/** E2B's SandboxMetric. */
export function metricBody(s: UsageSample) {
  return {
    timestamp: new Date(s.ts * 1000).toISOString(),
    timestampUnix: s.ts,
    cpuCount: s.cpuCount,
    cpuUsedPct: s.cpuUsedPct,
    memUsed: s.memUsed,
    memTotal: s.memTotal,
    memCache: s.memCache,
    diskUsed: s.diskUsed,
    diskTotal: s.diskTotal,
  };
}
