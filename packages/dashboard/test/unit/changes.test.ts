import { describe, expect, it } from 'vitest';
import { diffSandboxes, eventType } from '../../src/server/changes.js';
import { SandboxWatcher } from '../../src/server/watcher.js';

const m = (entries: [string, string][]) =>
  new Map(entries.map(([id, state]) => [id, { state, templateID: 'base' }]));

describe('sandbox change events', () => {
  it('names moves the way the cluster does', () => {
    expect(eventType(undefined, 'creating')).toBe('created');
    expect(eventType('running', undefined)).toBe('killed');
    expect(eventType('pausing', 'paused')).toBe('paused');
    expect(eventType('resuming', 'running')).toBe('resumed');
    expect(eventType('paused', 'running')).toBe('resumed');
    expect(eventType('snapshotting', 'running')).toBe('snapshot');
    expect(eventType('forking', 'running')).toBe('forked');
    expect(eventType('creating', 'running')).toBe('started');
    expect(eventType('running', 'pausing')).toBe('state');
  });

  it('reports new, changed and gone sandboxes, nothing for the unchanged', () => {
    const out = diffSandboxes(
      m([
        ['a', 'running'],
        ['b', 'running'],
        ['c', 'paused'],
      ]),
      m([
        ['d', 'creating'],
        ['a', 'pausing'],
        ['c', 'paused'],
      ]),
      'n1',
      'T',
    );
    expect(out.map((e) => [e.sandboxID, e.type, e.state])).toEqual([
      ['d', 'created', 'creating'],
      ['a', 'state', 'pausing'],
      ['b', 'killed', undefined],
    ]);
    expect(out[0]).toMatchObject({ nodeID: 'n1', timestamp: 'T', templateID: 'base' });
  });

  it('the watcher learns what exists silently, then emits and remembers changes', () => {
    let records = [{ sandboxId: 'a', state: 'running', templateId: 'base' }];
    const w = new SandboxWatcher(
      () => records,
      'n1',
      undefined,
      () => new Date(0),
    );
    const seen: string[] = [];
    w.subscribe((e) => seen.push(`${e.sandboxID}:${e.type}`));
    w.look();
    expect(seen).toEqual([]);
    records = [{ sandboxId: 'a', state: 'paused', templateId: 'base' }];
    w.look();
    records = [];
    expect(w.events('a').map((e) => e.type)).toEqual(['paused', 'killed']);
    expect(seen).toEqual(['a:paused', 'a:killed']);
  });
});
