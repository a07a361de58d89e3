import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { eventually } from '@agentenv/test-support';
import {
  api,
  API_KEY,
  homeOf,
  nearInstance,
  SNAPSHOT_STORE,
  startServer,
  urlOf,
  useTestServer,
} from '@agentenv/test-support/server';

/** The second node of the cross-node test: an instance number no other test uses. */
const INSTANCE_B = nearInstance(5);

useTestServer({ AENV_POOL_SIZE: '0' });

/** A background process holding a value in memory, served over a file on request. */
async function startCounter(sbx: Sandbox): Promise<void> {
  await sbx.files.write(
    '/home/user/counter.py',
    [
      'import os, time',
      'state = {"n": 0, "tag": open("/home/user/tag").read()}',
      'while True:',
      '    state["n"] += 1',
      '    if os.path.exists("/tmp/ask"):',
      '        open("/tmp/answer.tmp", "w").write(state["tag"])',
      '        os.rename("/tmp/answer.tmp", "/tmp/answer"); os.remove("/tmp/ask")',
      '    time.sleep(0.05)',
    ].join('\n'),
  );
  await sbx.commands.run('python3 /home/user/counter.py', { background: true, timeoutMs: 0 });
}

/**
 * The tag the process read into memory before the capture (not the file as it is now). One
 * round trip: the wait for the process's answer runs inside the sandbox, so sixteen children
 * asking at once do not flood the host with polling commands.
 */
async function memoryTag(sbx: Sandbox): Promise<string> {
  const r = await sbx.commands.run(
    'rm -f /tmp/answer; touch /tmp/ask; for i in $(seq 200); do [ -e /tmp/answer ] && break; sleep 0.05; done; cat /tmp/answer',
  );
  return r.stdout;
}

describe('snapshots', () => {
  it('starts sandboxes from a snapshot with the state of the source, independent of each other', async () => {
    const src = await Sandbox.create({ timeoutMs: 300_000 });
    await src.files.write('/home/user/tag', 'from-source');
    await startCounter(src);
    // The process runs and holds the tag in memory before the capture.
    expect(await memoryTag(src)).toBe('from-source');
    const endBefore = (await src.getInfo()).endAt.getTime();
    const snap = await src.createSnapshot({ name: `snap-${Date.now()}` } as never);
    expect(snap.snapshotId).toMatch(/^[a-z0-9]+$/);
    // The source keeps running with its id and end time.
    expect(await src.isRunning()).toBe(true);
    expect((await src.getInfo()).endAt.getTime()).toBe(endBefore);
    await src.files.write('/home/user/tag', 'changed-after');

    const kids = await Promise.all([1, 2, 3].map(() => Sandbox.create(snap.snapshotId)));
    try {
      for (const k of kids) {
        expect(await k.files.read('/home/user/tag')).toBe('from-source');
        expect(await memoryTag(k)).toBe('from-source');
      }
      await kids[0]!.files.write('/home/user/tag', 'kid-0');
      expect(await kids[1]!.files.read('/home/user/tag')).toBe('from-source');
      expect(await src.files.read('/home/user/tag')).toBe('changed-after');

      const listed = await Sandbox.listSnapshots({ sandboxId: src.sandboxId } as never).nextItems();
      expect(listed.map((s) => s.snapshotId)).toContain(snap.snapshotId);
      const byName = await api('GET', `/snapshots/${snap.names[0] ?? snap.snapshotId}`);
      expect(byName.json.snapshotID).toBe(snap.snapshotId);
      // Started from at once; the shared repository holds it a little later.
      await eventually(async () =>
        expect((await api('GET', `/snapshots/${snap.snapshotId}`)).json.stored).toBe(true),
      );
    } finally {
      await Promise.all(kids.map((k) => k.kill()));
    }
    // Snapshots outlive their source.
    await src.kill();
    const again = await Sandbox.create(snap.snapshotId);
    expect(await again.files.read('/home/user/tag')).toBe('from-source');
    await again.kill();
    expect((await api('DELETE', `/templates/${snap.snapshotId}`)).status).toBe(204);
    expect((await api('GET', `/snapshots/${snap.snapshotId}`)).status).toBe(404);
    expect((await api('POST', '/sandboxes', { templateID: snap.snapshotId })).status).toBe(400);
  });

  it('refuses a name already in use and unknown snapshots', async () => {
    const src = await Sandbox.create();
    try {
      const name = `dup-${Date.now()}`;
      expect((await api('POST', `/sandboxes/${src.sandboxId}/snapshots`, { name })).status).toBe(201);
      expect((await api('POST', `/sandboxes/${src.sandboxId}/snapshots`, { name })).status).toBe(409);
      expect((await api('GET', '/snapshots/nosuchsnapshot')).status).toBe(404);
      expect((await api('DELETE', '/templates/nosuchsnapshot')).status).toBe(404);
      expect((await api('POST', '/sandboxes/nosuchsandbox/snapshots', {})).status).toBe(404);
      await api('DELETE', `/templates/${name}`);
    } finally {
      await src.kill();
    }
  });
});

describe('fork', () => {
  it('forks 16 independent children while the parent runs on', async () => {
    const parent = await Sandbox.create({ timeoutMs: 600_000 });
    try {
      await parent.files.write('/home/user/tag', 'parent-state');
      await startCounter(parent);
      const endBefore = (await parent.getInfo()).endAt.getTime();
      const children = await parent.fork({ count: 16 } as never);
      expect(children).toHaveLength(16);
      const kids = children.filter((c): c is Sandbox => c instanceof Sandbox);
      expect(kids).toHaveLength(16);
      expect(new Set(kids.map((k) => k.sandboxId)).size).toBe(16);
      expect(await parent.isRunning()).toBe(true);
      const info = await parent.getInfo();
      expect(info.sandboxId).toBe(parent.sandboxId);
      expect(info.endAt.getTime()).toBe(endBefore);

      await Promise.all(
        kids.map(async (k, i) => {
          expect(await memoryTag(k)).toBe('parent-state');
          await k.files.write('/home/user/tag', `child-${i}`);
          expect((await k.commands.run('echo $E2B_SANDBOX_ID')).stdout.trim()).toBe(k.sandboxId);
        }),
      );
      for (const [i, k] of kids.entries()) expect(await k.files.read('/home/user/tag')).toBe(`child-${i}`);
      expect(await parent.files.read('/home/user/tag')).toBe('parent-state');
      await Promise.all(kids.map((k) => k.kill()));
    } finally {
      await parent.kill();
    }
  });

  it('validates count and the parent state', async () => {
    const parent = await Sandbox.create();
    try {
      expect((await api('POST', `/sandboxes/${parent.sandboxId}/fork`, { count: 0 })).status).toBe(400);
      expect((await api('POST', `/sandboxes/${parent.sandboxId}/fork`, { count: 17 })).status).toBe(400);
      await parent.pause();
      expect((await api('POST', `/sandboxes/${parent.sandboxId}/fork`, { count: 1 })).status).toBe(409);
      expect((await api('POST', '/sandboxes/nosuchsandbox/fork', { count: 1 })).status).toBe(404);
    } finally {
      await parent.kill();
    }
  });
});

describe('two nodes sharing a posix_fs snapshot repository', () => {
  const other = INSTANCE_B;
  const onB = (method: string, path: string, body?: unknown) =>
    fetch(`${urlOf(other)}${path}`, {
      method,
      headers: { 'x-api-key': API_KEY, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
  let b: Awaited<ReturnType<typeof startServer>>;
  beforeAll(async () => {
    b = await startServer({ AENV_POOL_SIZE: '0', AENV_SNAPSHOT_STORE: SNAPSHOT_STORE }, other);
  });
  afterAll(async () => {
    await b?.stop();
    rmSync(homeOf(other), { recursive: true, force: true });
  });

  it('starts a sandbox on node B from a snapshot taken on node A once the repository holds it', async () => {
    const src = await Sandbox.create();
    await src.files.write('/home/user/tag', 'made-on-a');
    const snap = await src.createSnapshot();
    // Asked to wait, A answers once the repository holds the snapshot: B lists it at once.
    const waited = await api('POST', `/sandboxes/${src.sandboxId}/snapshots?wait=stored`, {});
    expect(waited.status).toBe(201);
    expect(waited.json.stored).toBe(true);
    const listedOnB = async () =>
      ((await (await onB('GET', '/snapshots')).json()) as { snapshotID: string }[]).map((s) => s.snapshotID);
    expect(await listedOnB()).toContain(waited.json.snapshotID);
    await src.kill();
    // Not asked to wait, A answered before storing it; B finds it once A has.
    await eventually(async () => expect(await listedOnB()).toContain(snap.snapshotId));
    expect((await onB('DELETE', `/templates/${waited.json.snapshotID as string}`)).status).toBe(204);
    const created = await onB('POST', '/sandboxes', { templateID: snap.snapshotId });
    expect(created.status).toBe(201);
    const child = (await created.json()) as { sandboxID: string };
    const read = await fetch(`${urlOf(other)}/files?path=/home/user/tag&username=user`, {
      headers: { 'e2b-sandbox-id': child.sandboxID, 'e2b-sandbox-port': '49983' },
    });
    expect(await read.text()).toBe('made-on-a');
    expect((await onB('DELETE', `/sandboxes/${child.sandboxID}`)).status).toBe(204);
    expect((await onB('DELETE', `/templates/${snap.snapshotId}`)).status).toBe(204);
    expect((await api('GET', `/snapshots/${snap.snapshotId}`)).status).toBe(404);
  });

  it('resumes on node B a sandbox paused on node A, with its memory; A then no longer has it', async () => {
    const sbx = await Sandbox.create();
    await sbx.files.write('/home/user/tag', 'paused-on-a');
    await startCounter(sbx);
    expect(await memoryTag(sbx)).toBe('paused-on-a');
    await sbx.files.write('/home/user/tag', 'changed-after-start');
    await sbx.pause();
    // Pauses are not snapshots: they stay out of the snapshot catalogue.
    expect((await api('GET', `/snapshots?sandboxID=${sbx.sandboxId}`)).json).toEqual([]);

    // A pause answers before its upload to the shared repository: B finds it once that is done.
    const onNodeB = await eventually(
      () => Sandbox.connect(sbx.sandboxId, { apiUrl: urlOf(other), sandboxUrl: urlOf(other) }),
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    try {
      expect(await memoryTag(onNodeB)).toBe('paused-on-a');
      expect(await onNodeB.files.read('/home/user/tag')).toBe('changed-after-start');
      const again = await api('POST', `/sandboxes/${sbx.sandboxId}/connect`, { timeout: 60 });
      expect(again.status).toBe(404);
      expect((again.json as { message: string }).message).toMatch(/on another node/);
      expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(404);

      // Paused and resumed again on B: its second pause chains on the first.
      await onNodeB.pause();
      const back = await Sandbox.connect(sbx.sandboxId, { apiUrl: urlOf(other), sandboxUrl: urlOf(other) });
      expect(await memoryTag(back)).toBe('paused-on-a');
    } finally {
      expect((await onB('DELETE', `/sandboxes/${sbx.sandboxId}`)).status).toBe(204);
    }
    // Killed: nothing of it is left to resume anywhere.
    expect((await api('POST', `/sandboxes/${sbx.sandboxId}/connect`, { timeout: 60 })).status).toBe(404);
  });
});
