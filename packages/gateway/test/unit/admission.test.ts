import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IdempotencyStore, fingerprint } from '../../src/admission/idempotency.js';
import { AdmissionQueue } from '../../src/admission/queue.js';

describe('admission queue', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const queue = (maxInFlight: number, maxWaiting: number) =>
    new AdmissionQueue({ maxInFlight, maxWaiting, maxWaitMs: 1000, retryAfterSecs: 3 });

  it('lets creates in up to its limit and the rest wait, first come first served', async () => {
    const q = queue(2, 10);
    const r1 = await q.acquire();
    await q.acquire();
    const order: number[] = [];
    const waiting = [3, 4].map((n) => q.acquire().then((rel) => (order.push(n), rel)));
    expect(q.depth).toBe(2);
    r1();
    r1(); // a second release of the same grant changes nothing
    await waiting[0];
    expect(order).toEqual([3]);
    expect(q.active).toBe(2);
    expect(q.depth).toBe(1);
    expect(q.peakWaiting).toBe(2);
  });

  it('refuses at once with 429 + Retry-After when the queue is full', async () => {
    const q = queue(1, 1);
    await q.acquire();
    void q.acquire().catch(() => undefined);
    await expect(q.acquire()).rejects.toMatchObject({ kind: 'capacity', retryAfter: 3 });
  });

  it('refuses a create that waited too long, and forgets it', async () => {
    const q = queue(1, 5);
    const release = await q.acquire();
    const late = q.acquire();
    vi.advanceTimersByTime(1000);
    await expect(late).rejects.toMatchObject({ kind: 'capacity' });
    expect(q.depth).toBe(0);
    release();
    expect(q.active).toBe(0);
  });
});

describe('idempotency store', () => {
  const ok = (body: string) => ({ status: 201, headers: {}, body });

  it('runs concurrent duplicates once and gives them the same answer', async () => {
    const s = new IdempotencyStore({ ttlMs: 1000, maxKeys: 10 });
    let runs = 0;
    let finish!: () => void;
    const work = () =>
      new Promise<ReturnType<typeof ok>>((resolve) => {
        runs++;
        finish = () => resolve(ok(`sandbox-${runs}`));
      });
    const a = s.run('k', 'f', work);
    const b = s.run('k', 'f', work);
    finish();
    expect(await a).toEqual(ok('sandbox-1'));
    expect(await b).toEqual(ok('sandbox-1'));
    expect(await s.run('k', 'f', work)).toEqual(ok('sandbox-1'));
    expect(runs).toBe(1);
  });

  it('keeps successes for the TTL only', async () => {
    let now = 0;
    const s = new IdempotencyStore({ ttlMs: 1000, maxKeys: 10, now: () => now });
    await s.run('k', 'f', async () => ok('one'));
    now = 1000;
    expect(await s.run('k', 'f', async () => ok('two'))).toEqual(ok('two'));
  });

  it('lets a refused or failed create be retried with the same key', async () => {
    const s = new IdempotencyStore({ ttlMs: 1000, maxKeys: 10 });
    expect((await s.run('k', 'f', async () => ({ status: 429, headers: {}, body: '' }))).status).toBe(429);
    await expect(s.run('k', 'f', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await s.run('k', 'f', async () => ok('now'))).toEqual(ok('now'));
  });

  it('refuses a key reused for another request with 409', async () => {
    const s = new IdempotencyStore({ ttlMs: 1000, maxKeys: 10 });
    await s.run('k', fingerprint('POST', '/sandboxes', '{"templateID":"a"}'), async () => ok('x'));
    await expect(
      s.run('k', fingerprint('POST', '/sandboxes', '{"templateID":"b"}'), async () => ok('y')),
    ).rejects.toMatchObject({ kind: 'conflict' });
  });

  it('drops the oldest finished keys beyond its size', async () => {
    const s = new IdempotencyStore({ ttlMs: 60_000, maxKeys: 2 });
    for (const k of ['a', 'b', 'c']) await s.run(k, 'f', async () => ok(k));
    await s.run('d', 'f', async () => ok('d'));
    expect(s.size).toBe(2);
  });
});
