import { describe, expect, it } from 'vitest';
import { FAULT_KINDS } from '../../../../bench/chaos/faults.js';
import { report } from '../../../../bench/chaos/report.js';
import { runChaos } from '../../../../bench/chaos/run.js';

describe('bench/chaos.ts, short', () => {
  it('balances the books after rollouts with nodes, gateways, schedulers and Redis failing, each once', async () => {
    const started = Date.now();
    // The injector draws kinds from a shuffled deck: its first five faults are one of each kind.
    const r = await runChaos({
      durationMs: 30_000,
      minFaults: FAULT_KINDS.length,
      clients: 2,
      nodes: 3,
      seed: 24,
      faultEveryMs: 4_000,
      maxDownMs: 4_000,
    });
    console.log(report(r, (Date.now() - started) / 60_000));
    expect(new Set(r.faults.map((f) => f.kind))).toEqual(new Set(FAULT_KINDS));
    expect(r.rollouts).toBeGreaterThan(0);
    expect(r.verdict.violations).toEqual([]);
    expect(r.books.unexpected).toEqual([]);
    expect(r.leftovers).toEqual([]);
  });
});
