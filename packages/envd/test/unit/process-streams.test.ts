import { describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { parseMeminfo, parseProcStat } from '../../src/metrics.js';
import { processEnd } from '../../src/process/events.js';
import { Code, ConnectError, createHandlerContext } from '@connectrpc/connect';
import { Process } from '@agentenv/protocol';
import {
  abortError,
  AsyncQueue,
  DEFAULT_KEEPALIVE_MS,
  keepaliveIntervalMs,
  withKeepalive,
} from '../../src/streams.js';

describe('processEnd', () => {
  it('words exits and signals like Go', () => {
    expect(processEnd(0, null)).toEqual({ exitCode: 0, exited: true, status: 'exit status 0' });
    expect(processEnd(3, null)).toEqual({
      exitCode: 3,
      exited: true,
      status: 'exit status 3',
      error: 'exit status 3',
    });
    expect(processEnd(null, 'SIGKILL')).toMatchObject({
      exitCode: -1,
      exited: false,
      status: 'signal: killed',
    });
    expect(processEnd(null, 'SIGTERM').status).toBe('signal: terminated');
  });
});

describe('abortError', () => {
  const context = (timeoutMs: number | undefined, requestSignal?: AbortSignal) =>
    createHandlerContext({
      service: Process,
      method: Process.method.start,
      protocolName: 'connect',
      requestMethod: 'POST',
      url: '/process.Process/Start',
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(requestSignal ? { requestSignal } : {}),
    });

  it('is deadline_exceeded once the request deadline passed, as E2B envd ends such a stream', async () => {
    const ctx = context(1);
    await eventually(() => expect(ctx.signal.aborted).toBe(true), { intervalMs: 1 });
    const err = abortError(ctx.signal);
    expect(err).toBeInstanceOf(ConnectError);
    expect(err?.code).toBe(Code.DeadlineExceeded);
  });

  it('is canceled when the client went away, and nothing while the request lives', () => {
    const client = new AbortController();
    const ctx = context(60_000, client.signal);
    expect(abortError(ctx.signal)).toBeUndefined();
    client.abort();
    expect(abortError(ctx.signal)?.code).toBe(Code.Canceled);
  });
});

describe('AsyncQueue', () => {
  it('delivers pushed items in order, then ends', async () => {
    const q = new AsyncQueue<number>();
    q.push(1);
    setTimeout(() => {
      q.push(2);
      q.close();
      q.push(3);
    }, 5);
    const got: number[] = [];
    for await (const x of q) got.push(x);
    expect(got).toEqual([1, 2]);
  });
  it('throws the close error after draining', async () => {
    const q = new AsyncQueue<number>();
    q.push(1);
    q.close(new Error('boom'));
    const got: number[] = [];
    await expect(
      (async () => {
        for await (const x of q) got.push(x);
      })(),
    ).rejects.toThrow('boom');
    expect(got).toEqual([1]);
  });
});

describe('withKeepalive', () => {
  it('interleaves keepalives during silence only', async () => {
    const q = new AsyncQueue<string>();
    setTimeout(() => q.push('a'), 5);
    setTimeout(() => {
      q.push('b');
      q.close();
    }, 90);
    const got: string[] = [];
    for await (const x of withKeepalive(q, 30, () => 'ka')) got.push(x);
    expect(got[0]).toBe('a');
    expect(got.at(-1)).toBe('b');
    expect(got.filter((x) => x === 'ka').length).toBeGreaterThanOrEqual(1);
  });
  it("reads the interval header in seconds, E2B envd's 90 s when there is none", () => {
    expect(keepaliveIntervalMs(new Headers({ 'keepalive-ping-interval': '50' }))).toBe(50_000);
    expect(keepaliveIntervalMs(new Headers())).toBe(DEFAULT_KEEPALIVE_MS);
    expect(DEFAULT_KEEPALIVE_MS).toBe(90_000);
    expect(keepaliveIntervalMs(new Headers({ 'keepalive-ping-interval': 'x' }))).toBe(DEFAULT_KEEPALIVE_MS);
    expect(keepaliveIntervalMs(new Headers({ 'keepalive-ping-interval': '0' }))).toBe(DEFAULT_KEEPALIVE_MS);
  });
});

describe('metrics parsing', () => {
  it('reads /proc/stat and /proc/meminfo', () => {
    expect(parseProcStat('cpu  10 0 5 80 5 0 0 0 0 0\ncpu0 1 2 3')).toEqual({ busy: 15, total: 100 });
    const m = parseMeminfo(
      'MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\nCached:  50 kB\n',
    );
    expect(m).toEqual({ total: 1024000, used: 614400, cache: 51200 });
  });
});
