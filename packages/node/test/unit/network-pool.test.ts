import { describe, expect, it } from 'vitest';
import { WarmPool } from '../../src/network/pool.js';

function harness(size: number, failFirst = 0) {
  let next = 0;
  let failures = failFirst;
  const destroyed: number[] = [];
  const errors: unknown[] = [];
  const pool = new WarmPool<number>({
    size,
    create: async () => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      if (failures > 0) {
        failures--;
        throw new Error('boom');
      }
      return next++;
    },
    destroy: async (item) => {
      destroyed.push(item);
    },
    onError: (error) => errors.push(error),
  });
  return { pool, destroyed, errors };
}

describe('WarmPool', () => {
  it('fills to its size one at a time and refills after take()', async () => {
    const { pool } = harness(3);
    pool.fill();
    await pool.whenIdle();
    expect(pool.ready).toBe(3);
    expect(pool.take()).toBe(0);
    expect(pool.creating).toBe(true);
    await pool.whenIdle();
    expect(pool.ready).toBe(3);
    expect([pool.take(), pool.take(), pool.take()]).toEqual([1, 2, 3]);
  });

  it('takes items back up to twice its size, and builds none while what comes back keeps it full', async () => {
    const { pool } = harness(2);
    pool.fill();
    await pool.whenIdle();
    // A create/kill loop: each taken item comes back once its user is done.
    for (let i = 0; i < 5; i++) {
      const item = pool.take()!;
      await pool.whenIdle();
      expect(pool.put(item)).toBe(true);
    }
    expect(pool.ready).toBe(3);
    expect([pool.take(), pool.take(), pool.take()].sort()).toEqual([0, 1, 2]);
    await pool.whenIdle();
    expect(pool.ready).toBe(2);
    expect(pool.put(10)).toBe(true);
    expect(pool.put(11)).toBe(true);
    expect(pool.hasRoom).toBe(false);
    expect(pool.put(12)).toBe(false);
    await pool.close();
    expect(pool.put(13)).toBe(false);
  });

  it('does nothing with size 0', async () => {
    const { pool } = harness(0);
    pool.fill();
    expect(pool.take()).toBeUndefined();
    expect(pool.creating).toBe(false);
  });

  it('stops after a failure until asked again', async () => {
    const { pool, errors } = harness(2, 1);
    pool.fill();
    await pool.whenIdle();
    expect(errors).toHaveLength(1);
    expect(pool.ready).toBe(0);
    pool.fill();
    await pool.whenIdle();
    expect(pool.ready).toBe(2);
  });

  it('close() waits for the creation in flight, destroys it and returns the ready ones', async () => {
    const { pool, destroyed } = harness(2);
    pool.fill();
    await new Promise((resolve) => setTimeout(resolve, 0));
    const ready = await pool.close();
    expect(ready.length + destroyed.length).toBeGreaterThanOrEqual(1);
    expect(pool.creating).toBe(false);
    pool.fill();
    expect(pool.creating).toBe(false);
    expect(pool.take()).toBeUndefined();
  });
});
