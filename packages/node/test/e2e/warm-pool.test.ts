import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { useTestServer } from '@agentenv/test-support/server';
import { cgroups, frozen } from './sandbox-cgroups.js';

// The default pool of 2; no idle freeze, so only the pool's sandboxes are frozen.
useTestServer({ AENV_IDLE_FREEZE_SECS: '0' });

let first: Sandbox | undefined;
beforeAll(async () => {
  // The first create waits for the base template (built once per machine) and starts the pool.
  first = await Sandbox.create({ timeoutMs: 120_000 });
}, 300_000);
afterAll(async () => {
  await first?.kill();
});

describe('the warm pool', () => {
  it('waits frozen, and a create through the SDK gets a thawed sandbox from it that runs commands', async () => {
    // The first create's sandbox runs; the two restored beside it for the pool wait frozen.
    const pooled = await eventually(
      () => {
        const all = [...cgroups()];
        expect(all).toHaveLength(3);
        const waiting = all.filter(frozen);
        expect(waiting).toHaveLength(2);
        return waiting;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );

    const sbx = await Sandbox.create();
    try {
      // It is one of the waiting sandboxes, thawed (the refill restores another beside it).
      expect(pooled.filter((c) => !frozen(c))).toHaveLength(1);
      const r = await sbx.commands.run('echo from the pool');
      expect(r.stdout).toBe('from the pool\n');
    } finally {
      await sbx.kill();
    }
  }, 120_000);
});
