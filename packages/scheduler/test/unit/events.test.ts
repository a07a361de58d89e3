import { describe, expect, it } from 'vitest';
import { EventLog } from '../../src/events.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { ManualClock } from './helpers.js';

const ev = (sandboxId: string, type: 'created' | 'paused' = 'created', nodeId = 'a') => ({
  sandboxId,
  nodeId,
  type,
  reason: '',
  details: {},
});

describe('EventLog', () => {
  it('keeps a bounded history per sandbox, oldest first, with ids and times filled in', async () => {
    const clock = new ManualClock(5000);
    const log = new EventLog(new MemoryStore(clock, { perSandbox: 3, ttlMs: 60_000 }), clock);
    await log.report([ev('s1'), ev('s1', 'paused'), ev('s2')]);
    for (let i = 0; i < 3; i++) await log.report([ev('s1', 'paused')]);
    const list = await log.list('s1');
    expect(list).toHaveLength(3);
    expect(list.every((e) => e.type === 'paused' && e.timeMs === 5000 && e.eventId)).toBe(true);
    expect(await log.list('s1', 2)).toHaveLength(2);
    clock.advance(60_001);
    expect(await log.list('s1')).toEqual([]);
  });

  it('refuses bad events and limits', async () => {
    const clock = new ManualClock();
    const log = new EventLog(new MemoryStore(clock), clock);
    await expect(log.report([ev('')])).rejects.toMatchObject({ kind: 'invalid' });
    await expect(log.report([{ ...ev('s'), details: { k: 'x'.repeat(2000) } }])).rejects.toMatchObject({
      kind: 'invalid',
    });
    await expect(log.list('s', 5000)).rejects.toMatchObject({ kind: 'invalid' });
  });

  it('streams matching events to watchers until they leave', async () => {
    const clock = new ManualClock();
    const log = new EventLog(new MemoryStore(clock), clock);
    const ac = new AbortController();
    const seen: string[] = [];
    const done = (async () => {
      for await (const e of log.watch({ nodeId: 'b' }, ac.signal)) {
        seen.push(e.sandboxId);
        if (seen.length === 2) ac.abort();
      }
    })();
    await log.report([
      ev('s1', 'created', 'a'),
      ev('s2', 'created', 'b'),
      ev('s3', 'created', 'b'),
      ev('s4', 'created', 'b'),
    ]);
    await done;
    expect(seen).toEqual(['s2', 's3']);
  });
});
