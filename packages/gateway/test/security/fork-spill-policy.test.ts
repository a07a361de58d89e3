import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestCluster } from '@agentenv/test-support/cluster';

/** Room for the parent and one child per node: the fork's second child spills to the other node. */
const CAP = 2;

/** What a sandbox's policy is, as GET /sandboxes/{id} shows it. */
const policyOf = (d: Record<string, unknown>) => ({
  allowInternetAccess: d.allowInternetAccess,
  network: d.network,
  lifecycle: d.lifecycle,
  metadata: d.metadata,
  secure: typeof d.envdAccessToken === 'string',
});

describe('a fork whose children spill to another node keeps its parent policy there', () => {
  let c: TestCluster;

  beforeAll(async () => {
    c = await TestCluster.start({ nodes: 2, store: 'redis', nodeEnv: { AENV_MAX_SANDBOXES: String(CAP) } });
  });

  afterAll(async () => {
    await c?.stop();
  });

  it('gives the spilled child the local child network rules, lifecycle, metadata and security, and deletes the spill snapshot', async () => {
    const parent = await c.api('POST', '/sandboxes', {
      templateID: 'base',
      timeout: 600,
      metadata: { owner: 'tenant-a' },
      envVars: { TENANT: 'a' },
      autoPause: true,
      autoResume: { enabled: true },
      secure: true,
      allow_internet_access: false,
      network: { allowOut: ['203.0.113.7'], denyOut: ['198.51.100.0/24'], allowPublicTraffic: false },
    });
    expect(parent.status).toBe(201);
    const parentId = parent.json.sandboxID as string;

    const forked = await c.api('POST', `/sandboxes/${parentId}/fork`, { count: 2 });
    expect(forked.status).toBe(201);
    const results = forked.json as unknown as { sandbox?: { sandboxID: string }; error?: unknown }[];
    expect(results.filter((r) => r.error)).toEqual([]);
    const where = await c.placementOf();
    const home = where.get(parentId);
    const ids = results.map((r) => r.sandbox!.sandboxID);
    const local = ids.find((id) => where.get(id) === home)!;
    const spilled = ids.find((id) => where.get(id) !== home)!;
    expect(local).toBeDefined();
    expect(spilled).toBeDefined();
    expect(where.get(spilled)).toBeDefined();

    const detail = async (id: string) => {
      const r = await c.api('GET', `/sandboxes/${id}`);
      expect(r.status).toBe(200);
      return r.json as Record<string, unknown>;
    };
    const [p, l, s] = [await detail(parentId), await detail(local), await detail(spilled)];
    expect(policyOf(l)).toEqual(policyOf(p));
    expect(policyOf(s)).toEqual(policyOf(l));
    expect(policyOf(s)).toMatchObject({
      allowInternetAccess: false,
      network: { allowOut: ['203.0.113.7/32'], denyOut: ['198.51.100.0/24'], allowPublicTraffic: false },
      lifecycle: { onTimeout: 'pause', autoResume: true },
      metadata: { owner: 'tenant-a' },
      secure: true,
    });
    // Both children end when their parent does (give or take the spill's snapshot).
    expect(Math.abs(Date.parse(s.endAt as string) - Date.parse(l.endAt as string))).toBeLessThan(60_000);

    // The snapshot taken for the spill is gone once its child has started.
    const snaps = await c.api('GET', `/snapshots?sandboxID=${parentId}`);
    expect(snaps.status).toBe(200);
    expect(snaps.json).toEqual([]);
  });
});
