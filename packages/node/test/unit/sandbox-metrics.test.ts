import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { MetricsHistory, MetricsSampler } from '../../src/metrics/metrics-history.js';
import { bucketSamples, metricBody, metricsRange, metricsStep } from '../../src/metrics/metrics-range.js';
import { sandboxUsage, type UsageSample } from '../../src/orchestrator/sandbox-usage.js';

const MIB = 1024 * 1024;
const sample = (ts: number, extra: Partial<UsageSample> = {}): UsageSample => ({
  ts,
  cpuCount: 2,
  cpuUsedPct: 10,
  memUsed: 100 * MIB,
  memTotal: 1024 * MIB,
  memCache: 10 * MIB,
  diskUsed: 5 * MIB,
  diskTotal: 2048 * MIB,
  ...extra,
});

describe('sandbox usage from envd inside gVisor', () => {
  const size = { memoryMB: 1024, diskSizeMB: 2048 };
  // What envd reports for a 1 GiB sandbox whose 2 GiB writable layer lives in its memory.
  const raw = {
    ts: 1,
    cpu_count: 2,
    cpu_used_pct: 3.5,
    mem_total: 3072 * MIB,
    mem_used: 154 * MIB,
    mem_cache: 140 * MIB,
    disk_used: 50 * MIB,
    disk_total: 2 ** 63,
  };

  it('reports the sandbox size as totals and takes the layer out of memory', () => {
    expect(sandboxUsage(raw, size, null)).toEqual({
      ts: 1,
      cpuCount: 2,
      cpuUsedPct: 3.5,
      memUsed: 104 * MIB,
      memTotal: 1024 * MIB,
      memCache: 90 * MIB,
      diskUsed: 50 * MIB,
      diskTotal: 2048 * MIB,
    });
  });

  it('uses the driver\u2019s layer size when it has one, and leaves memory alone when the layer is on disk', () => {
    const onDisk = { ...raw, mem_total: 1024 * MIB };
    expect(sandboxUsage(onDisk, size, 70 * MIB)).toMatchObject({ memUsed: 154 * MIB, diskUsed: 70 * MIB });
    // Never below zero nor above the total.
    expect(sandboxUsage({ ...raw, mem_used: MIB }, size, null).memUsed).toBe(0);
    expect(sandboxUsage({ ...onDisk, mem_used: 4096 * MIB }, size, null).memUsed).toBe(1024 * MIB);
  });
});

describe('metrics ranges', () => {
  it('steps like E2B', () => {
    expect(metricsStep(59 * 60)).toBe(5);
    expect(metricsStep(3600)).toBe(30);
    expect(metricsStep(11 * 3600)).toBe(60);
    expect(metricsStep(23 * 3600)).toBe(120);
    expect(metricsStep(6 * 86400)).toBe(300);
    expect(metricsStep(30 * 86400)).toBe(900);
  });

  it('keeps to the sandbox\u2019s life and refuses an inverted range', () => {
    const life = { startedAt: 1000, now: 2000 };
    expect(metricsRange({}, life)).toEqual({ start: 1000, end: 2000 });
    expect(metricsRange({ start: 0, end: 1500 }, life)).toEqual({ start: 1000, end: 1500 });
    expect(metricsRange({ start: 1200, end: 9999 }, life)).toEqual({ start: 1200, end: 2000 });
    expect(metricsRange({ end: 900 }, life)).toBeUndefined();
    expect(() => metricsRange({ start: 10, end: 5 }, life)).toThrow(/start time cannot be after end time/);
  });

  it('answers only samples inside the range, one per bucket from its start', () => {
    const s = [
      sample(995),
      sample(1000),
      sample(1002, { cpuUsedPct: 30, memUsed: 300 * MIB }),
      sample(1007),
      sample(1020),
    ];
    const out = bucketSamples(s, { start: 1000, end: 1010 });
    expect(out.map((m) => m.ts)).toEqual([1000, 1005]);
    expect(out[0]).toMatchObject({ cpuUsedPct: 20, memUsed: 300 * MIB });
    expect(bucketSamples(s, { start: 1001, end: 1001 })).toEqual([]);
    expect(metricBody(sample(1000))).toMatchObject({
      timestamp: '1970-01-01T00:16:40.000Z',
      timestampUnix: 1000,
    });
  });
});

describe('metrics history', () => {
  it('keeps the newest samples in a bounded ring, in time order', () => {
    const h = new MetricsHistory(3);
    for (const ts of [1, 2, 3, 4, 5]) h.record('a', sample(ts));
    h.record('a', sample(4)); // out of order: ignored
    expect(h.samples('a').map((s) => s.ts)).toEqual([3, 4, 5]);
    expect(h.latest('a')).toEqual(sample(5));
    expect(h.samples('b')).toEqual([]);
    h.retain(new Set(['b']));
    expect(h.samples('a')).toEqual([]);
  });

  it('samples running sandboxes only, skips frozen ones, forgets gone ones and survives failures', async () => {
    const h = new MetricsHistory(10);
    h.record('gone', sample(1));
    let clock = 100;
    const asked: string[] = [];
    const sampler = new MetricsSampler({
      history: h,
      intervalMs: 1000,
      logger: pino({ level: 'silent' }),
      skip: (id) => id === 'frozen',
      source: {
        known: () => [
          { sandboxId: 'run1', running: true },
          { sandboxId: 'run2', running: true },
          { sandboxId: 'broken', running: true },
          { sandboxId: 'frozen', running: true },
          { sandboxId: 'paused', running: false },
        ],
        sample: async (id) => {
          asked.push(id);
          if (id === 'broken') throw new Error('envd went away');
          return sample(clock);
        },
      },
    });
    await sampler.tick();
    clock = 105;
    await sampler.tick();
    expect(asked.sort()).toEqual(['broken', 'broken', 'run1', 'run1', 'run2', 'run2']);
    expect(h.samples('run1').map((s) => s.ts)).toEqual([100, 105]);
    expect(h.samples('gone')).toEqual([]);
    expect(h.samples('broken')).toEqual([]);
  });
});
