import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { installProcessPolicy } from '../../src/process-policy.js';

function harness(shutdown: () => Promise<unknown>) {
  const target = new EventEmitter();
  const logs: { level: string; obj: object; msg: string }[] = [];
  const exits: number[] = [];
  let shutdowns = 0;
  installProcessPolicy({
    logger: {
      error: (obj, msg) => logs.push({ level: 'error', obj, msg }),
      fatal: (obj, msg) => logs.push({ level: 'fatal', obj, msg }),
    },
    shutdown: () => {
      shutdowns++;
      return shutdown();
    },
    shutdownTimeoutMs: 50,
    exit: (code) => exits.push(code),
    target,
  });
  return { target, logs, exits, shutdowns: () => shutdowns };
}

describe('the last-resort process policy', () => {
  it('logs an unhandled rejection and serves on', async () => {
    const h = harness(async () => undefined);
    const err = new Error('a request path rejected');
    h.target.emit('unhandledRejection', err, Promise.resolve());
    expect(h.logs).toEqual([{ level: 'error', obj: { err }, msg: 'unhandled rejection; serving on' }]);
    await new Promise((r) => setImmediate(r));
    expect(h.exits).toEqual([]);
    expect(h.shutdowns()).toBe(0);
  });

  it('logs an uncaught exception, stops cleanly once and exits non-zero', async () => {
    const h = harness(async () => undefined);
    const err = new Error('thrown from a callback');
    h.target.emit('uncaughtException', err);
    h.target.emit('uncaughtException', new Error('another, while stopping'));
    await eventually(() => expect(h.exits).toEqual([1]));
    expect(h.shutdowns()).toBe(1);
    expect(h.logs.map((l) => [l.level, l.msg])).toEqual([
      ['fatal', 'uncaught exception; stopping'],
      ['fatal', 'uncaught exception while stopping'],
    ]);
    expect(h.logs[0]!.obj).toEqual({ err });
  });

  it('exits non-zero when the stop fails or hangs', async () => {
    const failing = harness(() => Promise.reject(new Error('pause failed')));
    failing.target.emit('uncaughtException', new Error('x'));
    await eventually(() => expect(failing.exits).toEqual([1]));
    expect(failing.logs.at(-1)!.msg).toBe('stopping after an uncaught exception failed');

    const hanging = harness(() => new Promise(() => undefined));
    hanging.target.emit('uncaughtException', new Error('y'));
    await eventually(() => expect(hanging.exits).toEqual([1]));
  });
});
