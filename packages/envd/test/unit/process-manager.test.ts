import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { ProcessManager } from '../../src/process/manager.js';
import { EnvdState } from '../../src/state.js';

const state = new EnvdState({ defaultUser: 'root' });
const root = state.userFor(undefined);
const config = (script: string) => ({ cmd: '/bin/sh', args: ['-c', script], envs: {}, cwd: '/' });

describe('ProcessManager', () => {
  afterEach(() => vi.useRealTimers());

  it('lets Connect find a process for 30 s after it ended, as E2B envd does, then no more', async () => {
    const pm = new ProcessManager(state, pino({ level: 'silent' }));
    const proc = await pm.start({ config: config('exit 3'), tag: 't1' }, root);
    proc.subscribe();
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const end = await proc.wait();
    expect(end).toMatchObject({ exitCode: 3 });
    expect(() => pm.get({ pid: proc.pid })).toThrow(/not found/);
    expect(pm.connectable({ pid: proc.pid })).toBe(proc);
    expect(pm.connectable({ tag: 't1' })).toBe(proc);
    // A late subscriber sees how it ended.
    const late: unknown[] = [];
    for await (const ev of proc.subscribe()) late.push(ev);
    expect(late).toEqual([{ kind: 'end', end }]);

    vi.advanceTimersByTime(30_000);
    expect(() => pm.connectable({ pid: proc.pid })).toThrow(/not found/);
  });

  it('gives a reused tag to the new process at once, and forgets the one that had it', async () => {
    const pm = new ProcessManager(state, pino({ level: 'silent' }));
    const first = await pm.start({ config: config('exit 0'), tag: 'job' }, root);
    first.subscribe();
    await first.wait();
    const second = await pm.start({ config: config('sleep 30'), tag: 'job' }, root);
    try {
      expect(pm.connectable({ tag: 'job' })).toBe(second);
      second.backend.signal('SIGKILL');
      await second.wait();
      await eventually(() => expect(pm.connectable({ tag: 'job' })).toBe(second));
      expect(() => pm.connectable({ pid: first.pid })).toThrow(/not found/);
    } finally {
      second.backend.signal('SIGKILL');
    }
  });
});
