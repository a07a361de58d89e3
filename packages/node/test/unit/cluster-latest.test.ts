import { describe, expect, it } from 'vitest';
import { Latest } from '../../src/cluster/latest.js';

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

describe('Latest: a slow value never holds up a loop beyond its budget', () => {
  it('waits for the first value however long it takes', async () => {
    const first = deferred<number>();
    const latest = new Latest(() => first.promise, 1);
    const got = latest.get();
    setTimeout(() => first.resolve(1), 20);
    expect(await got).toBe(1);
  });

  it('answers with the last value when a fresh one is late, and the late one serves the next call', async () => {
    let next = deferred<number>();
    const latest = new Latest(() => next.promise, 5);
    next.resolve(1);
    expect(await latest.get()).toBe(1);
    next = deferred<number>();
    expect(await latest.get()).toBe(1);
    next.resolve(2);
    await next.promise;
    await new Promise((r) => setImmediate(r));
    next = deferred<number>();
    next.resolve(3);
    expect(await latest.get()).toBe(3);
  });

  it('keeps one gathering at a time', async () => {
    let calls = 0;
    const slow = deferred<number>();
    const latest = new Latest(() => (calls++ === 0 ? Promise.resolve(0) : slow.promise), 5);
    await latest.get();
    await Promise.all([latest.get(), latest.get(), latest.get()]);
    expect(calls).toBe(2);
  });

  it('a failed gathering falls back on the last value; with none it fails the call', async () => {
    let fail = true;
    const latest = new Latest(() => (fail ? Promise.reject(new Error('io')) : Promise.resolve(7)), 5);
    await expect(latest.get()).rejects.toThrow('io');
    fail = false;
    expect(await latest.get()).toBe(7);
    fail = true;
    expect(await latest.get()).toBe(7);
  });
});
