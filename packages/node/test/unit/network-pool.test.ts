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
