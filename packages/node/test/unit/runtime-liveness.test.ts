import { describe, expect, it } from 'vitest';
import { FROZEN_EVERY, LivenessMonitor, type Watched } from '../../src/runtime/gvisor/liveness.js';

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
