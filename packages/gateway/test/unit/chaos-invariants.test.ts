import { describe, expect, it } from 'vitest';
import { judge, type Observation, type Seen, type Told } from '../../../../bench/chaos/invariants.js';
import { classify } from '../../../../bench/chaos/workload.js';

const obs = (o: {
  told?: [string, Told][];
  seen?: [string, Seen][];
  nodes?: [string, [string, string][]][];
  bindings?: [string, string][];
  snapshots?: [string, boolean][];
}): Observation => ({
  told: new Map(o.told ?? []),
  seen: new Map(o.seen ?? []),
  nodes: new Map((o.nodes ?? []).map(([n, l]) => [n, new Map(l)])),
  bindings: new Map(o.bindings ?? []),
  snapshots: new Map(o.snapshots ?? []),
});

const rules = (o: Observation) => judge(o).violations.map((v) => `${v.rule} ${v.id}`);

describe('the chaos run’s books', () => {
  it('balance when every sandbox is as told, usable, and bound where it runs', () => {
    const v = judge(
      obs({
        told: [
          ['a', 'running'],
          ['b', 'paused'],
          ['c', 'killed'],
        ],
        seen: [
          ['a', { state: 'running', usable: true }],
          ['b', { state: 'paused', usable: true }],
          ['c', { state: 'absent' }],
        ],
        nodes: [
          ['n0', [['a', 'running']]],
          ['n1', [['b', 'paused']]],
        ],
        bindings: [
          ['a', 'n0'],
          ['b', 'n1'],
        ],
        snapshots: [['s', true]],
      }),
    );
    expect(v).toEqual({ violations: [], lost: 0, counts: { running: 1, paused: 1, killed: 1 } });
  });

  it('count a sandbox lost to a node failure as a documented loss, any other loss as a violation', () => {
    const o = obs({
      told: [
        ['a', 'running'],
        ['b', 'paused'],
        ['c', 'running'],
      ],
      seen: [
        ['a', { state: 'lost', reason: 'node failure: node h9n1 stopped heartbeating' }],
        ['b', { state: 'lost', reason: 'something else' }],
        ['c', { state: 'lost', reason: 'sandbox c was lost: node_restart' }],
      ],
    });
    expect(judge(o).lost).toBe(2);
    expect(rules(o)).toEqual(['lost-with-reason b']);
  });

  it('flag two running copies, a killed sandbox that came back, a vanished one and an unusable one', () => {
    const o = obs({
      told: [
        ['a', 'running'],
        ['k', 'killed'],
        ['v', 'running'],
        ['u', 'paused'],
      ],
      seen: [
        ['a', { state: 'running', usable: true }],
        ['k', { state: 'running' }],
        ['v', { state: 'absent' }],
        ['u', { state: 'paused', usable: false }],
      ],
      nodes: [
        ['n0', [['a', 'running']]],
        ['n1', [['a', 'running']]],
      ],
      bindings: [['a', 'n0']],
    });
    expect(rules(o).sort()).toEqual(
      [
        'one-running-copy a',
        'killed-stays-killed k',
        'told-exists v',
        'usable u',
        'store-matches-rosters a',
      ].sort(),
    );
  });

  it('flag a sandbox on a node that the store does not bind, and a snapshot that does not start', () => {
    const o = obs({ nodes: [['n0', [['x', 'paused']]]], snapshots: [['s', false]] });
    expect(rules(o)).toEqual(['store-matches-rosters x', 'snapshot-starts s']);
  });
});

describe('a chaos client’s reading of an error', () => {
  it.each([
    [new Error('503: scheduler unavailable'), 'retryable'],
    [Object.assign(new Error('fetch failed'), { cause: { code: 'ECONNREFUSED' } }), 'retryable'],
    [new Error('429: too many starts'), 'retryable'],
    [new Error('Sandbox is probably not running anymore'), 'retryable'],
    [
      new Error('[unavailable] the connection to node n0 was lost: This error is likely due to …'),
      'retryable',
    ],
    [new Error('[unavailable] the connection to sandbox abc was lost'), 'retryable'],
    [new Error('410: sandbox lost (node failure)'), 'gone'],
    [new Error('404: sandbox not found'), 'gone'],
    [new Error('400: bad request'), 'unexpected'],
  ])('%s → %s', (err, kind) => expect(classify(err)).toBe(kind));
});
