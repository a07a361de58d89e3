import { Sandbox, Template } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, useTestServer } from '@agentenv/test-support/server';

/**
 * A filesystem-only pause stores what the sandbox changed; what it started from comes back from
 * its template. These are the starts whose files are not the template image's alone: a build's
 * steps, and a snapshot of another sandbox.
 */
useTestServer();
const TEMPLATE = 'tpl-fs-pause';
/**
 * Waits until `path` in `s` is older, by ctime, than a sandbox started after: a pause compares
 * ctimes in whole seconds and allows one second of slack, so a file written just before a start
 * would be stored whatever its origin. Sandboxes share the host's clock.
 */
async function letFileAge(s: Sandbox, path: string): Promise<void> {
  const ctime = Number((await s.commands.run(`stat -c %Z ${path}`)).stdout);
  await eventually(() => expect(Math.floor(Date.now() / 1000)).toBeGreaterThanOrEqual(ctime + 2));
}

/** The second case's snapshot source: it writes its file before the one wait both cases need. */
let parent: Sandbox;

beforeAll(async () => {
  await Template.build(
    Template().fromTemplate('base').runCmd('echo from-the-build > /home/user/build.txt'),
    TEMPLATE,
  );
  parent = await Sandbox.create({ timeoutMs: 300_000 });
  await parent.files.write('/home/user/parent.txt', 'written before the snapshot');
  await letFileAge(parent, '/home/user/parent.txt');
}, 300_000);
afterAll(async () => {
  await parent?.kill().catch(() => undefined);
  await api('DELETE', `/templates/${TEMPLATE}`);
});

const read = async (s: Sandbox, path: string) => (await s.commands.run(`cat ${path}`)).stdout;

describe('filesystem-only pause of sandboxes that did not start from a bare image', () => {
  it("keeps a built template's files through a filesystem-only pause and a reboot", async () => {
    const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
    try {
      await sbx.files.write('/home/user/own.txt', 'the sandbox’s own');
      await sbx.pause({ keepMemory: false });
      const cold = await Sandbox.connect(sbx.sandboxId);
      expect(await read(cold, '/home/user/build.txt')).toBe('from-the-build\n');
      expect(await read(cold, '/home/user/own.txt')).toBe('the sandbox’s own');
      await cold.pause();
      const rebooted = await Sandbox.connect(sbx.sandboxId, { onResume: 'reboot' });
      expect(await read(rebooted, '/home/user/build.txt')).toBe('from-the-build\n');
      expect(await read(rebooted, '/home/user/own.txt')).toBe('the sandbox’s own');
    } finally {
      await sbx.kill();
    }
  });

  it("keeps the files a snapshot's source sandbox wrote, and its own, through a filesystem-only pause", async () => {
    const { snapshotId } = await parent.createSnapshot();
    await parent.kill();
    const child = await Sandbox.create(snapshotId, { timeoutMs: 300_000 });
    try {
      await child.files.write('/home/user/child.txt', 'written by the child');
      await child.pause({ keepMemory: false });
      const cold = await Sandbox.connect(child.sandboxId);
      expect(await read(cold, '/home/user/parent.txt')).toBe('written before the snapshot');
      expect(await read(cold, '/home/user/child.txt')).toBe('written by the child');
    } finally {
      await child.kill();
      await Sandbox.deleteSnapshot(snapshotId);
    }
  });
});
