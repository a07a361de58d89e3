import { describe, expect, it } from 'vitest';
import { eventually, until } from '@agentenv/test-support';

describe('eventually', () => {
  it('returns what the function returns once it stops throwing', async () => {
    let calls = 0;
    const value = await eventually(
      () => {
        calls++;
        if (calls < 3) throw new Error('not yet');
        return 'ready';
      },
      { intervalMs: 1 },
    );
    expect(value).toBe('ready');
    expect(calls).toBe(3);
  });

  it('waits for async conditions', async () => {
    let ready = false;
    setImmediate(() => (ready = true));
    await eventually(async () => expect(ready).toBe(true), { intervalMs: 1 });
  });

  it('throws the last failure once the time is up', async () => {
    let calls = 0;
    const err = await eventually(
      () => {
        calls++;
        throw new Error(`attempt ${calls}`);
      },
      { timeoutMs: 20, intervalMs: 5 },
    ).catch((e: unknown) => e);
    expect((err as Error).message).toBe(`attempt ${calls}`);
  });
});

describe('until', () => {
  it('returns the first value that is neither undefined nor false', async () => {
    const answers = [undefined, false, 0, 7];
    const value = await until('a number', async () => answers.shift(), { intervalMs: 1 });
    expect(value).toBe(0);
  });

  it('names what it waited for, with the last error, once the time is up', async () => {
    const err = await until(
      'the daemon',
      async () => {
        throw new Error('connection refused');
      },
      { timeoutMs: 20, intervalMs: 5 },
    ).catch((e: unknown) => e);
    expect((err as Error).message).toBe('timed out waiting for the daemon: Error: connection refused');
  });
});
