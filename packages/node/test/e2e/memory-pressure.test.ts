import { Sandbox } from 'e2b';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, useTestServer } from '@agentenv/test-support/server';

// A limit below one idle sandbox's working set: every sandbox idle long enough is paused. At
// level info the node logs each relief's choice, which a failed ordering assertion quotes.
const ctx = useTestServer({ AENV_POOL_SIZE: '0', AENV_MEMORY_LIMIT_MB: '1', AENV_LOG_LEVEL: 'info' });
const pressureLog = () =>
  ctx.server
    .output()
    .split('\n')
    .filter((l) => /memory pressure|"op":"pause"/.test(l))
    .join('\n');
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
});

const stateOf = async (id: string) => (await api('GET', `/sandboxes/${id}`)).json.state as string;
const pausedAt = async (id: string) => {
  const events = (await api('GET', `/sandboxes/${id}/events`)).json as unknown as {
    type: string;
    reason: string;
    timestamp: string;
  }[];
  const e = events.find((x) => x.type === 'paused' && x.reason === 'memory_pressure');
  if (!e) throw new Error(`${id} has no memory-pressure pause: ${JSON.stringify(events)}`);
  return Date.parse(e.timestamp);
};

describe('memory pressure', () => {
  it('pauses idle sandboxes least recently used first; a request brings one back intact', async () => {
    const a = await Sandbox.create();
    const b = await Sandbox.create();
    try {
      // a is used last: b is the least recently used, and goes first.
      await b.commands.run('echo b > /tmp/state');
      await a.commands.run('echo a > /tmp/state; sleep 100000 >/dev/null 2>&1 & echo $! > /tmp/pid');

      const nodes = (await api('GET', '/nodes')).json as unknown as Record<string, number | null>[];
      expect(nodes[0]).toMatchObject({ memoryLimitMiB: 1 });
      expect(nodes[0]!.memoryNominalMiB).toBeGreaterThanOrEqual(2 * 1024);
      expect(nodes[0]!.memoryFreeMiB).toBeGreaterThan(0);
      const metrics = await fetch(`${process.env.E2B_API_URL}/metrics`).then((r) => r.text());
      for (const kind of ['nominal', 'measured', 'free', 'host_total', 'limit'])
        expect(metrics).toMatch(new RegExp(`^aenv_memory_bytes\\{kind="${kind}"\\} \\d`, 'm'));

      // Waits for the pauses' events: the API shows a pausing sandbox as paused already.
      const [pausedB, pausedA] = await eventually(
        () => Promise.all([pausedAt(b.sandboxId), pausedAt(a.sandboxId)]),
        { timeoutMs: 120_000, intervalMs: 500 },
      );
      expect(
        pausedB,
        `b paused ${pausedB - pausedA} ms after a; the node said:\n${pressureLog()}`,
      ).toBeLessThan(pausedA);
      expect(await stateOf(a.sandboxId)).toBe('paused');

      // autoResume is off; a sandbox paused for memory comes back on its next request anyway.
      const r = await a.commands.run('cat /tmp/state; kill -0 "$(cat /tmp/pid)" && echo alive');
      expect(r.stdout).toBe('a\nalive\n');
      expect(await stateOf(a.sandboxId)).toBe('running');
      const events = (await api('GET', `/sandboxes/${a.sandboxId}/events`)).json as unknown as {
        type: string;
        reason: string;
      }[];
      expect(events.map((e) => `${e.type}:${e.reason}`)).toContain('resumed:memory_pressure');
    } finally {
      await Promise.all([a.kill(), b.kill()]);
    }
  }, 300_000);
});
