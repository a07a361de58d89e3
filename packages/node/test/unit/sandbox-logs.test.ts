import { describe, expect, it } from 'vitest';
import { logLine, queryLogs, SandboxLogs } from '../../src/orchestrator/sandbox-logs.js';

function logsAt(times: number[]): SandboxLogs {
  let i = 0;
  const logs = new SandboxLogs(() => times[i++]!);
  return logs;
}

describe('sandbox logs', () => {
  const logs = logsAt([1000, 2000, 3000, 4000, 2500]);
  logs.add('s', 'sandbox created from base', 'info', { templateID: 'base' });
  logs.add('s', 'envd slow to answer', 'warn');
  logs.add('s', 'sandbox paused', 'debug');
  logs.add('s', 'restore failed', 'error');
  logs.add('s', 'sandbox resumed'); // the clock stepped back: kept after the previous entry
  const all = logs.get('s');
  const messages = (e: typeof all) => e.map((x) => x.message);

  it('keeps entries in time order with levels and fields', () => {
    expect(all.map((e) => e.timestampMs)).toEqual([1000, 2000, 3000, 4000, 4000]);
    expect(all[0]).toEqual({
      timestampMs: 1000,
      level: 'info',
      message: 'sandbox created from base',
      fields: { templateID: 'base' },
    });
    expect(logs.get('other')).toEqual([]);
  });

  it('answers from a cursor, either way, by minimum level and message substring', () => {
    expect(messages(queryLogs(all, { limit: 2, direction: 'forward' }))).toEqual([
      'sandbox created from base',
      'envd slow to answer',
    ]);
    expect(messages(queryLogs(all, { limit: 2, direction: 'backward' }))).toEqual([
      'sandbox resumed',
      'restore failed',
    ]);
    expect(messages(queryLogs(all, { cursorMs: 3000, limit: 10, direction: 'forward' }))).toEqual([
      'sandbox paused',
      'restore failed',
      'sandbox resumed',
    ]);
    expect(messages(queryLogs(all, { limit: 10, direction: 'forward', level: 'warn' }))).toEqual([
      'envd slow to answer',
      'restore failed',
    ]);
    expect(messages(queryLogs(all, { limit: 10, direction: 'forward', search: 'sandbox' }))).toHaveLength(3);
    expect(queryLogs(all, { limit: 10, direction: 'forward', search: 'Sandbox' })).toEqual([]);
    expect(queryLogs(all, { limit: 0, direction: 'forward' })).toEqual([]);
  });

  it('writes the raw line as flat JSON the e2b CLI parses', () => {
    expect(JSON.parse(logLine(all[0]!))).toEqual({
      templateID: 'base',
      level: 'info',
      message: 'sandbox created from base',
    });
  });

  it('keeps a bounded number of entries and forgets dropped sandboxes', () => {
    const l = new SandboxLogs(() => 1);
    for (let i = 0; i < 600; i++) l.add('x', `line ${i}`);
    expect(l.get('x')).toHaveLength(500);
    expect(l.get('x')[0]!.message).toBe('line 100');
    l.drop('x');
    expect(l.get('x')).toEqual([]);
  });
});
