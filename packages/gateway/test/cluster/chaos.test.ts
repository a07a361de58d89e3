import { describe, expect, it } from 'vitest';
import { report } from '../../../../bench/chaos/report.js';
import { runChaos } from '../../../../bench/chaos/run.js';

describe('bench/chaos.ts, short', () => {
  it('balances the books after a minute of rollouts with nodes, gateways, schedulers and Redis failing', async () => {
    const started = Date.now();
    const r = await runChaos({
      durationMs: 70_000,
      clients: 2,
      nodes: 3,
      seed: 24,
      faultEveryMs: 8_000,
      maxDownMs: 5_000,
    });
    console.log(report(r, (Date.now() - started) / 60_000));
    expect(r.faults.length).toBeGreaterThanOrEqual(4);
    expect(r.rollouts).toBeGreaterThan(0);
    expect(r.verdict.violations).toEqual([]);
    expect(r.books.unexpected).toEqual([]);
    expect(r.leftovers).toEqual([]);
  });
});
