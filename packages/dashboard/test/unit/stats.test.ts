import { describe, expect, it } from 'vitest';
import { errorsByKind, latency, latencySeries, percentile } from '../../src/shared/stats.js';
import type { StageSample } from '../../src/shared/types.js';

const s = (stage: string, at: number, ms: number, ok = true): StageSample => ({ stage, at, ms, ok });

describe('latency statistics', () => {
  it('takes nearest-rank percentiles', () => {
    const v = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
    expect(percentile(v, 50)).toBe(50);
    expect(percentile(v, 95)).toBe(100);
    expect(percentile([7], 95)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });

  it('summarises only successful samples of the stage inside the window', () => {
    const samples = [
      s('create', 100, 5),
      s('create', 200, 300),
      s('create', 250, 100),
      s('resume', 250, 9),
      s('create', 260, 0, false),
    ];
    expect(latency(samples, 'create', 150)).toEqual({ count: 2, p50: 100, p95: 300 });
  });

  it('buckets samples into a series ending now, with gaps where nothing happened', () => {
    const samples = [s('create', 1_000, 10), s('create', 1_500, 30), s('create', 2_100, 50)];
    const out = latencySeries(samples, 'create', 3_000, 3_000, 1_000);
    expect(out.t).toEqual([1, 2, 3]);
    expect(out.p50).toEqual([null, 10, 50]);
    expect(out.p95).toEqual([null, 30, 50]);
    expect(out.rate).toEqual([0, 2, 1]);
  });

  it('counts failures by stage, most frequent first', () => {
    const samples = [
      s('pause', 10, 0, false),
      s('create', 11, 0, false),
      s('create', 12, 0, false),
      s('fork', 1, 0, false),
    ];
    expect(errorsByKind(samples, 5)).toEqual([
      ['create', 2],
      ['pause', 1],
    ]);
  });
});
