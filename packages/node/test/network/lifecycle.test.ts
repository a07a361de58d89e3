import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NetworkError } from '../../src/network/errors.js';
import { NetworkManager } from '../../src/network/manager.js';
import {
  INTERNET_ADDRESS,
  createTestInternet,
  fetchFrom,
  isRoot,
  leftovers,
  silentLogger,
  type TestInternet,
} from '@agentenv/test-support/network';
import { stressRounds } from '@agentenv/test-support';

const NOTHING = { namespaces: [], links: [], rules: [] };
/** A slot leaked per cycle shows after a few; AENV_TEST_STRESS=1 runs the long hunt for a rare one. */
const CYCLES = stressRounds(20, 100);

describe.skipIf(!isRoot())('network slot lifecycle', () => {
  let internet: TestInternet | undefined;
  const managers: NetworkManager[] = [];

  async function manager(options: Parameters<typeof NetworkManager.create>[0]): Promise<NetworkManager> {
    const created = await NetworkManager.create({ logger: silentLogger, ...options });
    managers.push(created);
    return created;
  }

  beforeAll(async () => {
    internet = await createTestInternet();
  });

  afterAll(async () => {
    try {
      for (const m of managers) await m.shutdown().catch(() => undefined);
    } finally {
      await internet?.close();
    }
  });

  it(`leaks nothing over ${CYCLES} acquire/release cycles, and shutdown removes everything`, async () => {
    const m = await manager({ nodeTag: 'tl', hostRange: '10.237.3.0/24', poolSize: 1 });
    const timings = { acquire: [] as number[], release: [] as number[] };
    const indexes = new Set<number>();
    for (let i = 0; i < CYCLES; i++) {
      let start = performance.now();
      const slot = await m.acquire(i % 2 ? { allowInternet: false, allowOut: [], denyOut: [] } : undefined);
      timings.acquire.push(performance.now() - start);
      indexes.add(slot.index);
      start = performance.now();
      await m.release(slot);
      timings.release.push(performance.now() - start);
    }
    await m.poolIdle();
    // A released slot goes back to the pool (which keeps up to twice its size of them), so the
    // loop runs on the pooled slot and the one built when the first was taken.
    expect(indexes.size).toBe(2);
    const state = await leftovers('tl');
    expect(state.namespaces).toHaveLength(4); // the pooled slots' router and sandbox namespaces
    expect(state.links).toHaveLength(2);
    expect(m.stats()).toMatchObject({ live: 0, pooled: 2 });

    const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]?.toFixed(1);
    console.log(
      `slot timings over ${CYCLES} cycles (pool 1): acquire median ${median(timings.acquire)} ms, ` +
        `release median ${median(timings.release)} ms`,
    );

    await m.shutdown();
    expect(await leftovers('tl')).toEqual(NOTHING);
    await expect(m.acquire()).rejects.toMatchObject({ code: 'SHUT_DOWN' });
  });

  it('creates many slots in parallel safely and measures a cold create', async () => {
    const m = await manager({ nodeTag: 'tp', hostRange: '10.237.4.0/24', poolSize: 0 });
    const start = performance.now();
    const single = await m.acquire();
    const cold = performance.now() - start;
    const parallelStart = performance.now();
    const slots = await Promise.all(Array.from({ length: 12 }, () => m.acquire()));
    const parallel = performance.now() - parallelStart;
    console.log(`cold slot create ${cold.toFixed(1)} ms; 12 in parallel ${parallel.toFixed(0)} ms`);
    const all = [single, ...slots];
    expect(new Set(all.map((slot) => slot.index)).size).toBe(13);
    expect(new Set(all.map((slot) => slot.hostAddress)).size).toBe(13);
    const results = await Promise.all(
      all.map((slot) => fetchFrom(slot.names.sandboxNs, `http://${INTERNET_ADDRESS}/`)),
    );
    expect(results.filter((result) => !result.ok)).toEqual([]);
    const releaseStart = performance.now();
    await Promise.all(all.map((slot) => m.release(slot)));
    console.log(`13 releases in parallel ${(performance.now() - releaseStart).toFixed(0)} ms`);
    expect(m.stats().live).toBe(0);
    await m.shutdown();
    expect(await leftovers('tp')).toEqual(NOTHING);
  });

  it('reclaims what a crashed node with the same tag left behind', async () => {
    const crashed = await NetworkManager.create({
      nodeTag: 'tc',
      hostRange: '10.237.5.0/24',
      poolSize: 2,
      logger: silentLogger,
    });
    await crashed.acquire();
    await crashed.acquire({ allowInternet: false, allowOut: [], denyOut: [] });
    await crashed.poolIdle();
    const before = await leftovers('tc');
    expect(before.namespaces).toHaveLength(8);
    expect(before.links).toHaveLength(4);
    expect(before.rules.length).toBeGreaterThan(0);

    // "Crash": the manager is dropped without shutdown; a new process starts with the same tag.
    const warnings: object[] = [];
    const successor = await manager({
      nodeTag: 'tc',
      hostRange: '10.237.5.0/24',
      poolSize: 0,
      logger: { info: () => undefined, warn: (fields) => warnings.push(fields) },
    });
    expect(warnings).toContainEqual(expect.objectContaining({ namespaces: 8, links: 4, chains: 3 }));
    const after = await leftovers('tc');
    expect(after.namespaces).toEqual([]);
    expect(after.links).toEqual([]);
    const slot = await successor.acquire();
    expect(slot.index).toBe(0);
    expect((await fetchFrom(slot.names.sandboxNs, `http://${INTERNET_ADDRESS}/`)).ok).toBe(true);
    await successor.shutdown();
    expect(await leftovers('tc')).toEqual(NOTHING);
  });

  it('refuses a host range already in use and slots it does not own', async () => {
    const first = await manager({ nodeTag: 'tu', hostRange: '10.237.6.0/24', poolSize: 1 });
    await first.poolIdle();
    const clash = await NetworkManager.create({
      nodeTag: 'tv',
      hostRange: '10.237.6.0/24',
      poolSize: 0,
      logger: silentLogger,
    }).catch((error: unknown) => error);
    expect(clash).toBeInstanceOf(NetworkError);
    expect((clash as NetworkError).code).toBe('RANGE_IN_USE');
    expect(await leftovers('tv')).toEqual(NOTHING);

    const other = await manager({ nodeTag: 'tw', hostRange: '10.237.7.0/24', poolSize: 0 });
    const foreign = await other.acquire();
    await expect(first.release(foreign)).rejects.toMatchObject({ code: 'UNKNOWN_SLOT' });
    await expect(
      first.setEgress(
        {
          index: foreign.index,
          netnsPath: foreign.netnsPath,
          hostAddress: foreign.hostAddress,
          sandboxAddress: foreign.sandboxAddress,
          reset: async () => undefined,
        },
        { allowInternet: true, allowOut: [], denyOut: [] },
      ),
    ).rejects.toMatchObject({ code: 'UNKNOWN_SLOT' });
    await other.release(foreign);
    await other.release(foreign);
    await Promise.all([first.shutdown(), other.shutdown()]);
    for (const tag of ['tu', 'tw']) expect(await leftovers(tag)).toEqual(NOTHING);
  });
});
