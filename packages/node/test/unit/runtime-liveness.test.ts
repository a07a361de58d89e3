import { describe, expect, it } from 'vitest';
import { DriverLayout } from '../../src/runtime/gvisor/layout.js';
import {
  FROZEN_EVERY,
  LivenessMonitor,
  sweepOrphans,
  type Watched,
} from '../../src/runtime/gvisor/liveness.js';

/** A monitor over `sandboxes`, whose pids in `dead` no longer run; records what it looked at. */
function monitor(sandboxes: Watched[], dead: Set<number>) {
  const looked: number[] = [];
  const reported: string[] = [];
  const m = new LivenessMonitor(
    () => sandboxes,
    async (id) => void reported.push(id),
    async (pid) => (looked.push(pid), !dead.has(pid)),
  );
  return { m, looked, reported };
}

const sb = (id: string, pid: number, o: Partial<Watched> = {}): Watched => ({
  id,
  pid,
  quiet: false,
  frozen: false,
  ...o,
});

describe('liveness monitor', () => {
  it('reports a running sandbox whose process died, and leaves quiet ones alone', async () => {
    const { m, reported } = monitor([sb('a', 1), sb('b', 2), sb('c', 3, { quiet: true })], new Set([2, 3]));
    await m.check();
    expect(reported).toEqual(['b']);
  });

  it('looks at frozen sandboxes only once every FROZEN_EVERY rounds', async () => {
    const { m, looked, reported } = monitor([sb('run', 1), sb('ice', 2, { frozen: true })], new Set([2]));
    for (let i = 0; i < 2 * FROZEN_EVERY; i++) await m.check();
    expect(looked.filter((p) => p === 1)).toHaveLength(2 * FROZEN_EVERY);
    expect(looked.filter((p) => p === 2)).toHaveLength(2);
    // A frozen sandbox killed from outside is still reported, at its next look.
    expect(reported).toEqual(['ice', 'ice']);
  });
});

describe('orphan sweep', () => {
  // A layout whose directories do not exist: the orphans are those `runsc list` names.
  const layout = new DriverLayout('/nonexistent/aenv-sweep-test', 'aenv-sweep-test');

  it('thaws a predecessor’s frozen sandboxes before runsc is asked about any of them', async () => {
    const frozen = new Set(['pooled-1', 'pooled-2']);
    const steps: string[] = [];
    // runsc asks every container it loads whether it still runs; a frozen one never answers.
    const refuseFrozen = (what: string) => {
      if (frozen.size) throw new Error(`${what} waited on a frozen sentry`);
    };
    await sweepOrphans(layout, {
      thawAll: async () => {
        steps.push('thaw');
        frozen.clear();
      },
      list: async () => {
        refuseFrozen('runsc list');
        steps.push('list');
        const ids = ['pooled-1', 'pooled-2', 'known'].map((id) => ({ id }));
        return { code: 0, stdout: JSON.stringify(ids), stderr: '', timedOut: false };
      },
      known: (id) => id === 'known',
      release: async (id) => {
        refuseFrozen(`runsc delete ${id}`);
        steps.push(`release ${id}`);
      },
      finishSuspended: async (id) => void steps.push(`finish ${id}`),
    });
    // A pause that answered before its checkpoint gets that checkpoint before the release.
    expect(steps).toEqual([
      'thaw',
      'list',
      'finish pooled-1',
      'release pooled-1',
      'finish pooled-2',
      'release pooled-2',
    ]);
  });
});
