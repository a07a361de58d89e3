import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, stressRounds } from '@agentenv/test-support';
import { api, NODE_TAG, RUNTIME_PATH, useTestServer } from '@agentenv/test-support/server';

useTestServer({ AENV_POOL_SIZE: '0' });
beforeAll(async () => {
  const warm = await api('POST', '/v2/sandboxes', { templateID: 'base' });
  await api('DELETE', `/sandboxes/${warm.json.sandboxID as string}`);
});

const sh = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });

/** What sandboxes of the test node hold on the host: processes, namespaces, links, mounts, rules. */
function footprint() {
  return {
    runsc: sh('ps', ['-eo', 'args'])
      .split('\n')
      .filter((l) => l.startsWith('runsc') && l.includes(`${RUNTIME_PATH}/`)).length,
    namespaces: sh('ip', ['netns', 'list'])
      .split('\n')
      .filter((l) => l.startsWith(`aenv-${NODE_TAG}-`)).length,
    links: sh('ip', ['-o', 'link'])
      .split('\n')
      .filter((l) => l.includes(`ae-${NODE_TAG}-`)).length,
    mounts: readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .filter((l) => l.includes(`${RUNTIME_PATH}/`) || l.includes(`${RUNTIME_PATH} `)).length,
    rules: sh('iptables-save', [])
      .split('\n')
      .filter((l) => l.includes(`-${NODE_TAG}-`)).length,
  };
}

/**
 * Four at a time: kills overlap creates, where a leak from a race would show. A leak per cycle
 * shows after a few rounds; AENV_TEST_STRESS=1 runs twelve to hunt a rarer race.
 */
const CYCLES = stressRounds(16, 48);
/** The node's network pool size (its default). */
const SPARE_SLOTS = 4;

describe('create/kill cycles', () => {
  it(`leaks no processes, namespaces, links, mounts or rules after ${CYCLES} cycles`, async () => {
    const before = footprint();
    const ids: string[] = [];
    for (let i = 0; i < CYCLES; i += 4) {
      await Promise.all(
        [0, 1, 2, 3].map(async () => {
          const r = await api('POST', '/v2/sandboxes', { templateID: 'base' });
          expect(r.status).toBe(201);
          ids.push(r.json.sandboxID as string);
          expect((await api('DELETE', `/sandboxes/${r.json.sandboxID as string}`)).status).toBe(204);
        }),
      );
    }
    expect(new Set(ids).size).toBe(CYCLES);
    // A kill answers before its slot and the runtime's leftovers are reclaimed in the background.
    // A leak is more than before; fewer is not. Released network slots go back to the node's pool
    // of spares, which keeps up to twice its size (4): those are not a leak either.
    await eventually(
      () => {
        const now = footprint();
        for (const k of ['runsc', 'mounts', 'rules'] as const)
          expect(now[k], k).toBeLessThanOrEqual(before[k]);
        expect(now.links, 'links').toBeLessThanOrEqual(Math.max(before.links, 2 * SPARE_SLOTS));
        expect(now.namespaces, 'namespaces (a router and a sandbox one per slot)').toBe(2 * now.links);
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    expect((await api('GET', '/v2/sandboxes')).json).toEqual([]);
  }, 600_000);
});
