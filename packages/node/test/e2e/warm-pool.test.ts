import { execFileSync } from 'node:child_process';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { NODE_TAG, RUNTIME_PATH, startServer, useTestServer } from '@agentenv/test-support/server';
import { cgroups, frozen } from './sandbox-cgroups.js';

// A pool of 2 (test nodes default to 1); no idle freeze, so only the pool's sandboxes are frozen.
const ENV = { AENV_POOL_SIZE: '2', AENV_IDLE_FREEZE_SECS: '0' };
const node = useTestServer(ENV);

let first: Sandbox | undefined;
beforeAll(async () => {
  // The first create waits for the base template (built once per machine) and starts the pool.
  first = await Sandbox.create({ timeoutMs: 120_000 });
}, 300_000);
afterAll(async () => {
  // Gone already when a test below crashed the node.
  await first?.kill().catch(() => undefined);
});

/** The pool's sandboxes once it is full: `running` sandboxes beside them, all of them frozen. */
function fullPool(running: number): Promise<string[]> {
  return eventually(
    () => {
      const all = [...cgroups()];
      expect(all).toHaveLength(running + 2);
      const waiting = all.filter(frozen);
      expect(waiting).toHaveLength(2);
      return waiting;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
}

/** runsc processes of the test node, network namespaces of its tag. */
function hostLeftovers(): { runsc: number; namespaces: string[] } {
  const ps = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).split('\n');
  const netns = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' }).split('\n');
  return {
    runsc: ps.filter((l) => l.startsWith('runsc') && l.includes(`${RUNTIME_PATH}/`)).length,
    namespaces: netns.filter((l) => l.startsWith(`aenv-${NODE_TAG}-`)),
  };
}

describe('the warm pool', () => {
  it('waits frozen, and a create through the SDK gets a thawed sandbox from it that runs commands', async () => {
    // The first create's sandbox runs; the two restored beside it for the pool wait frozen.
    const pooled = await fullPool(1);

    const sbx = await Sandbox.create();
    try {
      // It is one of the waiting sandboxes, thawed (the refill restores another beside it).
      expect(pooled.filter((c) => !frozen(c))).toHaveLength(1);
      const r = await sbx.commands.run('echo from the pool');
      expect(r.stdout).toBe('from the pool\n');
    } finally {
      await sbx.kill();
    }
  }, 120_000);

  it('a node killed with its pool frozen starts again within the fixture’s minute and sweeps it', async () => {
    const before = await fullPool(1);
    await node.server.stop('SIGKILL');
    // The frozen sandboxes outlived their node; the next one releases them before it answers.
    node.server = await startServer(ENV);
    await eventually(() => expect([...cgroups()].filter((c) => before.includes(c))).toEqual([]), {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    first = undefined;
  }, 180_000);

  it('a node stopped with its pool frozen leaves no cgroups, namespaces or runsc processes', async () => {
    const sbx = await Sandbox.create();
    await sbx.kill();
    await fullPool(0);
    await node.server.stop('SIGTERM');
    expect(node.server.child.exitCode).toBe(0);
    expect([...cgroups()]).toEqual([]);
    expect(hostLeftovers()).toEqual({ runsc: 0, namespaces: [] });
  }, 180_000);
});
