import { describe, expect, it } from 'vitest';
import { redisMissing } from '@agentenv/test-support/cluster';
import { report } from '../../../../bench/scale/report.js';
import { runScale, type Store } from '../../../../bench/scale/run.js';

// Ports of helper range 192xx: scheduler 19230, redis 19202.
const stores: Store[] = redisMissing() ? ['memory'] : ['memory', 'redis'];

describe('bench/scheduler-scale.ts, quick', () => {
  it('places against simulated nodes over the wire on both stores and reports every column', async () => {
    const r = await runScale({
      nodes: [20],
      stores,
      flows: ['schedule', 'full'],
      clients: [4],
      phaseMs: 1000,
      procs: 2,
      intervalMs: 500,
      shape: { rosterSize: 10, templates: 5, templatesPerNode: 2 },
      schedulerPort: 19230,
      redisPort: 19202,
      env: { AENV_SCHEDULER_RESERVATION_TTL_MS: '1000' },
    });
    expect(r.setups.map((s) => [s.store, s.nodes, s.sandboxes])).toEqual(stores.map((s) => [s, 20, 200]));
    for (const s of r.setups) {
      expect(s.heartbeatsPerSec).toBeGreaterThan(0);
      expect(s.heartbeatErrors).toBe(0);
    }
    expect(r.phases).toHaveLength(stores.length * 2);
    for (const p of r.phases) {
      expect(p, p.firstError).toMatchObject({ errors: 0 });
      expect(p.placementsPerSec).toBeGreaterThan(0);
      expect(p.p99Ms).toBeGreaterThan(0);
      if (p.store === 'redis') expect(p.redisOpsPerPlacement).toBeGreaterThan(0);
    }
    expect(report(r)).toMatch(/placements\/s[\s\S]*peaks at/);
  });
});
