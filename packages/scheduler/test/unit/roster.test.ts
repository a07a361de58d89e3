import { describe, expect, it } from 'vitest';
import type { Binding } from '../../src/model.js';
import { reconcileRoster } from '../../src/membership/roster.js';
import { running } from './helpers.js';

const t = { now: 10_000, assignmentGraceMs: 4000, refreshAfterMs: 20_000 };
const bound = (sandboxId: string, over: Partial<Binding> = {}): Binding => ({
  sandboxId,
  nodeId: 'a',
  state: 'running',
  templateId: 'base',
  cpuCount: 2,
  memoryMib: 1024,
  source: 'roster',
  updatedMs: 9000,
  ...over,
});

describe('reconcileRoster', () => {
  it('keeps a sandbox declared lost while its node was silent lost, and fences it, when the node lists it again', () => {
    const current = new Map([
      ['lost', bound('lost', { state: 'lost', lostReason: 'node failure' })],
      ['elsewhere', bound('elsewhere', { nodeId: 'b', state: 'lost' })],
    ]);
    const r = reconcileRoster('a', [running('lost'), running('elsewhere')], current, t);
    expect(r.fenced).toEqual(['lost']);
    expect(r.put.map((b) => b.sandboxId)).toEqual(['elsewhere']);
    expect(r.remove).toEqual([]);
  });

  it('writes new and changed entries only, and refreshes old ones', () => {
    const current = new Map([
      ['same', bound('same')],
      ['changed', bound('changed')],
      ['old', bound('old', { updatedMs: -20_000 })],
    ]);
    const r = reconcileRoster(
      'a',
      [
        running('same'),
        running('changed', { state: 'paused', pauseId: 'p' }),
        running('old'),
        running('new'),
      ],
      current,
      t,
    );
    expect(r.put.map((b) => b.sandboxId)).toEqual(['changed', 'old', 'new']);
    expect(r.put[0]).toMatchObject({ state: 'paused', pauseId: 'p', source: 'roster', updatedMs: 10_000 });
    expect(r.remove).toEqual([]);
  });

  it('drops what the roster no longer lists, except young assignments and lost sandboxes', () => {
    const current = new Map([
      ['gone', bound('gone')],
      ['young', bound('young', { source: 'assignment', updatedMs: 7000 })],
      ['aged', bound('aged', { source: 'assignment', updatedMs: 6000 })],
      ['lost', bound('lost', { state: 'lost' })],
      ['elsewhere', bound('elsewhere', { nodeId: 'b' })],
    ]);
    expect(reconcileRoster('a', [], current, t).remove).toEqual(['gone', 'aged']);
  });

  it('a stale paused entry does not take back a sandbox another node runs', () => {
    const current = new Map([['s', bound('s', { nodeId: 'b', state: 'running' })]]);
    expect(reconcileRoster('a', [running('s', { state: 'paused' })], current, t).put).toEqual([]);
    // …but a running entry does (the roster of the node that runs it wins).
    expect(reconcileRoster('a', [running('s')], current, t).put).toHaveLength(1);
    // …and a paused entry takes over a sandbox another node only holds paused or lost.
    const atRest = new Map([['s', bound('s', { nodeId: 'b', state: 'paused' })]]);
    expect(reconcileRoster('a', [running('s', { state: 'paused' })], atRest, t).put).toHaveLength(1);
  });
});
