import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { useTestServer } from '@agentenv/test-support/server';
import { cgroups, ksmStats } from './sandbox-cgroups.js';

const KSM = '/sys/kernel/mm/ksm';
const ksm = (f: string) => readFileSync(join(KSM, f), 'utf8').trim();
// The node runs ksmd only when the host does not: a host running it already keeps it running.
const hostRunsKsm = existsSync(KSM) && ksm('run') !== '0';

const server = existsSync(KSM) ? useTestServer({ AENV_MERGE_PAGES: '1', AENV_POOL_SIZE: '0' }) : undefined;
beforeAll(async () => {
  if (!server) return;
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
}, 300_000);

describe.skipIf(!server)('runtime.merge_pages (KSM; skipped: this kernel has no /sys/kernel/mm/ksm)', () => {
  const held: Sandbox[] = [];
  afterAll(async () => {
    await Promise.all(held.map((s) => s.kill()));
  });

  it("merges the sandboxes' identical runtime pages, then stops ksmd until the next sandbox", async () => {
    const before = cgroups();
    for (let i = 0; i < 3; i++) held.push(await Sandbox.create());
    const mine = [...cgroups()].filter((c) => !before.has(c));
    expect(mine).toHaveLength(3);
    for (const c of mine) for (const p of ksmStats(c)) expect(p.ksm_merge_any).toBe('yes');
    // Restored from one template, the three sentries hold identical pages: merged, and the
    // sandboxes still answer.
    await eventually(
      () => {
        const merged = mine.map((c) => ksmStats(c).reduce((n, p) => n + Number(p.ksm_merging_pages), 0));
        expect(Math.min(...merged)).toBeGreaterThan(0);
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    for (const s of held) expect((await s.commands.run('echo ok')).stdout).toBe('ok\n');
    if (!hostRunsKsm)
      await eventually(() => expect(ksm('run')).toBe('0'), { timeoutMs: 90_000, intervalMs: 500 });
  }, 300_000);
});
