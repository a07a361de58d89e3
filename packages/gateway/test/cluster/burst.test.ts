import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { TEST_CLUSTER_KEY as API_KEY, TestCluster } from '@agentenv/test-support/cluster';

const PER_NODE = 20;
const BURST = 300;

describe(`burst admission: ${BURST} concurrent creates against a cluster that holds ${3 * PER_NODE}`, () => {
  let c: TestCluster;

  beforeAll(async () => {
    c = await TestCluster.start({
      nodes: 3,
      store: 'redis',
      nodeEnv: { AENV_MAX_SANDBOXES: String(PER_NODE) },
    });
  });

  afterAll(async () => {
    await c?.stop();
  });

  const create = (
    headers: Record<string, string> = {},
    body: unknown = { templateID: 'base', timeout: 600 },
  ) =>
    fetch(`${c.gatewayUrl}/sandboxes`, {
      method: 'POST',
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }).then(async (r) => ({
      status: r.status,
      retryAfter: r.headers.get('retry-after'),
      json: (await r.json()) as Record<string, unknown>,
    }));

  // First, on an idle cluster: after the burst the nodes are still reclaiming the killed
  // sandboxes' host resources, and the scheduler sees the places free only at the nodes' next
  // heartbeats, so creates get 429 with Retry-After for a while.
  it('returns the same sandbox to retries with one Idempotency-Key, concurrent or later', async () => {
    const key = { 'idempotency-key': `h9-${Date.now()}` };
    const first = await Promise.all(Array.from({ length: 5 }, () => create(key)));
    expect(first.map((a) => a.status)).toEqual([201, 201, 201, 201, 201]);
    const id = first[0]!.json.sandboxID as string;
    expect(new Set(first.map((a) => a.json.sandboxID))).toEqual(new Set([id]));
    const later = await create(key);
    expect(later).toMatchObject({ status: 201, json: { sandboxID: id } });
    const reused = await create(key, { templateID: 'base', timeout: 60 });
    expect(reused).toMatchObject({ status: 409, json: { code: 409 } });
    expect([...(await c.placementOf()).keys()]).toEqual([id]);
    expect((await c.api('DELETE', `/sandboxes/${id}`)).status).toBe(204);
  });

  it('answers every call 201 or 429 with Retry-After, and leaks no sandbox', async () => {
    const answers = await Promise.all(Array.from({ length: BURST }, () => create()));
    const by = new Map<number, number>();
    for (const a of answers) by.set(a.status, (by.get(a.status) ?? 0) + 1);
    console.log(`burst of ${BURST}: ${[...by].map(([s, n]) => `${n}×${s}`).join(', ')}`);
    expect([...by.keys()].filter((s) => s !== 201 && s !== 429)).toEqual([]);
    for (const a of answers.filter((x) => x.status === 429)) {
      expect(Number(a.retryAfter)).toBeGreaterThan(0);
      expect(a.json).toMatchObject({ code: 429, message: expect.any(String) });
    }
    const ids = answers.filter((a) => a.status === 201).map((a) => a.json.sandboxID as string);
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.length).toBeLessThanOrEqual(3 * PER_NODE);
    // Every sandbox that exists was answered to a client: none was made for a refused call.
    expect(new Set((await c.placementOf()).keys())).toEqual(new Set(ids));
    const metrics = await (await fetch(`${c.gatewayUrl}/metrics`)).text();
    console.log(
      metrics
        .split('\n')
        .filter((l) => /^aenv_gateway_(placements_total|create_queue_wait_seconds_(count|sum))/.test(l))
        .join('\n'),
    );
    await Promise.all(
      ids.map((id) =>
        fetch(`${c.gatewayUrl}/sandboxes/${id}`, { method: 'DELETE', headers: { 'x-api-key': API_KEY } }),
      ),
    );
    await eventually(async () => expect([...(await c.placementOf()).keys()]).toEqual([]), {
      timeoutMs: 60_000,
    });
  });
});
