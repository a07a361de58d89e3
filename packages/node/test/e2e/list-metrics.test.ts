import { Sandbox } from 'e2b';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, useTestServer } from '@agentenv/test-support/server';

const MIB = 1024 * 1024;

useTestServer();
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
});

const listIds = async (opts: Parameters<typeof Sandbox.list>[0]) => {
  const p = Sandbox.list(opts);
  const ids: string[] = [];
  while (p.hasNext) ids.push(...(await p.nextItems()).map((s) => s.sandboxId));
  return ids;
};

describe('Sandbox.list filters, order and pages', () => {
  it('filters by metadata, state, template and start time, in either order, page by page', async () => {
    const tag = { suite: 'list', 'key with space': 'a&b=c' };
    const created: Sandbox[] = [];
    for (let i = 0; i < 3; i++) created.push(await Sandbox.create({ metadata: { ...tag, n: String(i) } }));
    const other = await Sandbox.create({ metadata: { suite: 'other' } });
    try {
      await created[1]!.pause();
      const [a, b, c] = created.map((s) => s.sandboxId);
      const query = { metadata: tag };
      expect(await listIds({ query })).toEqual([c, b, a]);
      expect(await listIds({ query, order: 'asc' })).toEqual([a, b, c]);
      expect(await listIds({ query: { ...query, state: ['paused'] } })).toEqual([b]);
      expect(await listIds({ query: { ...query, state: ['running'] }, order: 'asc' })).toEqual([a, c]);
      expect(await listIds({ query: { ...query, template: 'base' } })).toEqual([c, b, a]);
      expect(await listIds({ query: { ...query, template: 'no-such-template' } })).toEqual([]);

      const infoB = await Sandbox.getInfo(b!);
      expect(await listIds({ query: { ...query, startedAfter: infoB.startedAt }, order: 'asc' })).toEqual([
        b,
        c,
      ]);

      // One per page: three pages, then none.
      const pager = Sandbox.list({ query, limit: 1 });
      const pages: string[][] = [];
      while (pager.hasNext) pages.push((await pager.nextItems()).map((s) => s.sandboxId));
      expect(pages).toEqual([[c], [b], [a]]);

      const raw = await api('GET', `/v2/sandboxes?metadata=${encodeURIComponent('suite=list')}&limit=1`);
      expect(raw.headers.get('x-total-running')).toBe('2');
      expect(raw.headers.get('x-next-token')).toBeTruthy();
      expect((await api('GET', '/v2/sandboxes?order=sideways')).json).toMatchObject({
        code: 400,
        message: "invalid order 'sideways': must be asc or desc",
      });
      expect((await api('GET', '/v2/sandboxes?nextToken=bogus')).status).toBe(400);
      // The deprecated list: running ones only, metadata filter honoured.
      const legacy = await api('GET', `/sandboxes?metadata=${encodeURIComponent('suite=list')}`);
      expect((legacy.json as { sandboxID: string }[]).map((s) => s.sandboxID)).toEqual([c, a]);
    } finally {
      await Promise.all([...created, other].map((s) => s.kill()));
    }
  });
});

describe('sandbox metrics', () => {
  it('report the sandbox size as totals, the writable layer as disk use, and keep to the range', async () => {
    const sbx = await Sandbox.create();
    try {
      const info = await api('GET', `/sandboxes/${sbx.sandboxId}`);
      const { memoryMB, diskSizeMB, startedAt } = info.json as {
        memoryMB: number;
        diskSizeMB: number;
        startedAt: string;
      };
      const first = await sbx.getMetrics();
      expect(first.length).toBeGreaterThanOrEqual(1);
      expect(first[0]).toMatchObject({ memTotal: memoryMB * MIB, diskTotal: diskSizeMB * MIB });
      expect(first[0]!.memUsed).toBeGreaterThan(0);
      expect(first[0]!.memUsed).toBeLessThan(memoryMB * MIB);

      await sbx.commands.run('head -c 40000000 /dev/urandom > /home/user/blob');
      // Three samples, the last after the write.
      const grown = await eventually(
        async () => {
          const m = await sbx.getMetrics();
          expect(m.length).toBeGreaterThanOrEqual(3);
          expect(m.at(-1)!.diskUsed).toBeGreaterThanOrEqual(40_000_000);
          return m;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      // The file is on the writable layer, not counted as the sandbox's memory.
      expect(grown.at(-1)!.memUsed).toBeLessThan(grown.at(-1)!.memTotal);
      const born = Math.floor(Date.parse(startedAt) / 1000);
      expect(grown.every((m) => m.timestamp.getTime() / 1000 >= born)).toBe(true);
      const all = await sbx.getMetrics({ start: new Date(0) });
      expect(all.every((m) => m.timestamp.getTime() / 1000 >= born)).toBe(true);

      const ts = all.map((m) => m.timestamp.getTime());
      const mid = new Date(ts[1]!);
      // Points are 5 s buckets from the range's start: the second bucket alone, asked as a range.
      const ranged = await sbx.getMetrics({ start: mid, end: new Date(ts[1]! + 4000) });
      expect(ranged.map((m) => m.timestamp.getTime())).toEqual([ts[1]]);
      const later = (await sbx.getMetrics({ start: mid })).map((m) => m.timestamp.getTime());
      expect(later[0]).toBe(ts[1]);
      expect(later.every((t) => t >= ts[1]!)).toBe(true);

      const bad = await api('GET', `/sandboxes/${sbx.sandboxId}/metrics?start=20&end=10`);
      expect(bad.json).toMatchObject({ code: 400, message: 'start time cannot be after end time' });
    } finally {
      await sbx.kill();
    }
  });

  it('answer several sandboxes at once', async () => {
    const [a, b] = await Promise.all([Sandbox.create(), Sandbox.create()]);
    try {
      const r = await api('GET', `/sandboxes/metrics?sandbox_ids=${a.sandboxId},${b.sandboxId},unknown0id`);
      expect(r.status).toBe(200);
      const sandboxes = (r.json as unknown as { sandboxes: Record<string, { memTotal: number }> }).sandboxes;
      expect(Object.keys(sandboxes).sort()).toEqual([a.sandboxId, b.sandboxId].sort());
      expect(sandboxes[a.sandboxId]!.memTotal).toBeGreaterThan(0);
      const many = Array.from({ length: 101 }, (_, i) => `id${i}`).join(',');
      expect((await api('GET', `/sandboxes/metrics?sandbox_ids=${many}`)).json).toMatchObject({
        code: 400,
        message: 'Too many sandboxes requested, maximum is 100',
      });
      expect((await api('GET', '/sandboxes/metrics')).status).toBe(400);
    } finally {
      await Promise.all([a.kill(), b.kill()]);
    }
  });
});
