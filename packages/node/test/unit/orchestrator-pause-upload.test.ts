import { describe, expect, it } from 'vitest';
import { FakeNode, FakePauses, type FakeNodeOptions } from '@agentenv/test-support/fakes';
import { pauseStored } from '../../src/orchestrator/index.js';

/** A node with one running sandbox holding `mem: 1`, and the next repository save held. */
async function pausingWithUploadHeld(opts: FakeNodeOptions = {}) {
  const { node, id, orch } = await FakeNode.withRunning(opts, {}, { mem: '1' });
  const save = node.storage.faults.hold('save');
  await orch.pause(id);
  await save.reached;
  return { node, id, orch, save };
}

describe('orchestrator: pause answers before the repository upload', () => {
  it('is paused from its local capture while the upload runs, then from the repository', async () => {
    const { node, id, orch, save } = await pausingWithUploadHeld();
    const rec = orch.get(id);
    expect(rec).toMatchObject({ state: 'paused', uploadPending: true });
    expect(rec.pauseId).toBeUndefined();
    expect(node.captures.complete(rec.captureDir!)).toBe(true);
    expect(node.storage.pauses.size).toBe(0);
    expect(node.driver.running()).toEqual([]);
    expect(node.slots.used).toBe(0);

    save.release();
    await orch.backgroundIdle(id);
    const stored = orch.get(id);
    expect(stored.state).toBe('paused');
    expect(stored.uploadPending).toBeUndefined();
    expect(stored.captureDir).toBeUndefined();
    expect(node.storage.pauses.has(stored.pauseId!)).toBe(true);
    expect(node.disk.has(FakePauses.cacheDir(stored.pauseId!))).toBe(true);
    expect(node.captures.of(id)).toEqual([]);
  });

  it('a resume during the upload restores the local capture; the upload is then dropped', async () => {
    const { node, id, orch, save } = await pausingWithUploadHeld();
    const dir = orch.get(id).captureDir!;
    expect(await orch.connect(id, 60)).toBe(true);
    const handle = orch.get(id).handle!;
    expect(handle.restoredFrom).toBe(dir);
    expect(node.driver.state(handle.id)).toMatchObject({ mem: '1' });
    expect(orch.get(id).uploadPending).toBeUndefined();

    save.release();
    await orch.backgroundIdle(id);
    expect(orch.get(id).state).toBe('running');
    expect(orch.get(id).pauseId).toBeUndefined();
    expect(node.storage.pauses.size).toBe(0);
    // The resume stopped the upload before it stored anything.
    expect(node.storage.faults.calls('committed')).toBe(0);
    expect(node.captures.of(id)).toEqual([]);
  });

  it('an upload stopped for a resume that is refused starts again, and the pause gets stored', async () => {
    const { node, id, orch, save } = await pausingWithUploadHeld({ maxSandboxes: 1 });
    expect((await node.create()).state).toBe('running');
    expect(await orch.connect(id, 60).catch((e: unknown) => e)).toBeInstanceOf(Error);
    save.release();
    await orch.backgroundIdle(id);
    const rec = orch.get(id);
    expect(rec).toMatchObject({ state: 'paused' });
    expect(rec.uploadPending).toBeUndefined();
    expect(node.storage.pauses.has(rec.pauseId!)).toBe(true);
  });

  it('a pause after such a resume stores the newer capture, never the older', async () => {
    const { node, id, orch, save } = await pausingWithUploadHeld();
    await orch.connect(id, 60);
    node.driver.write(orch.get(id).handle!.id, 'mem', '2');
    await orch.pause(id);
    save.release();
    await orch.backgroundIdle(id);
    const rec = orch.get(id);
    expect(rec.uploadPending).toBeUndefined();
    expect([...node.storage.pauses.keys()]).toEqual([rec.pauseId]);
    await orch.connect(id, 60);
    expect(node.driver.state(orch.get(id).handle!.id)).toMatchObject({ mem: '2' });
  });

  it('a kill during the upload leaves nothing in the repository or on disk', async () => {
    const { node, id, orch, save } = await pausingWithUploadHeld();
    await orch.kill(id);
    save.release();
    await orch.backgroundIdle();
    expect(orch.find(id)).toBeUndefined();
    expect(node.storage.pauses.size).toBe(0);
    expect(node.captures.of(id)).toEqual([]);
  });

  it('a shutdown waits until the repository holds the pauses it made', async () => {
    const { node, id, orch } = await FakeNode.withRunning({}, {}, { mem: '1' });
    const save = node.storage.faults.hold('save');
    let stopped = false;
    const stopping = orch.shutdown().then(() => (stopped = true));
    await save.reached;
    await new Promise((r) => setImmediate(r));
    expect(orch.get(id)).toMatchObject({ state: 'paused', uploadPending: true });
    expect(stopped).toBe(false);
    save.release();
    await stopping;
    expect(node.storage.pauses.has(orch.get(id).pauseId!)).toBe(true);
  });
});

describe('orchestrator: a crash during the pause upload', () => {
  it('the restarted node uploads the pause again, and resumes it with its memory', async () => {
    const { node: old, id } = await pausingWithUploadHeld();
    const node = old.restart();
    expect(node.orchestrator.recover()).toEqual({ paused: 1, lost: [] });
    await node.orchestrator.backgroundIdle(id);
    const rec = node.orchestrator.get(id);
    expect(rec.uploadPending).toBeUndefined();
    expect(node.storage.pauses.has(rec.pauseId!)).toBe(true);
    expect(node.captures.of(id)).toEqual([]);
    await node.orchestrator.connect(id, 60);
    expect(node.driver.state(node.orchestrator.get(id).handle!.id)).toMatchObject({ mem: '1' });
  });

  it('a resume while the restarted upload runs uses the local capture', async () => {
    const { node: old, id, orch: oldOrch } = await pausingWithUploadHeld();
    const dir = oldOrch.get(id).captureDir!;
    const node = old.restart();
    const save = node.storage.faults.hold('save');
    node.orchestrator.recover();
    await save.reached;
    await node.orchestrator.connect(id, 60);
    const handle = node.orchestrator.get(id).handle!;
    expect(handle.restoredFrom).toBe(dir);
    expect(node.driver.state(handle.id)).toMatchObject({ mem: '1' });
    save.release();
    await node.orchestrator.backgroundIdle(id);
    expect(node.storage.pauses.size).toBe(0);
  });

  it('an upload that fails after the restart keeps the pause on this node', async () => {
    const { node: old, id } = await pausingWithUploadHeld();
    const node = old.restart();
    node.storage.faults.failNext('save');
    node.orchestrator.recover();
    await node.orchestrator.backgroundIdle(id);
    const rec = node.orchestrator.get(id);
    expect(rec.state).toBe('paused');
    expect(rec.uploadPending).toBeUndefined();
    expect(node.captures.complete(rec.captureDir!)).toBe(true);
    await node.orchestrator.connect(id, 60);
    expect(node.driver.state(node.orchestrator.get(id).handle!.id)).toMatchObject({ mem: '1' });
  });

  it('says whether the pause is stored: not while it uploads, nor after a failed upload', async () => {
    const { node, id, orch, save } = await pausingWithUploadHeld();
    expect(pauseStored(orch.get(id))).toBe(false);
    save.release();
    await orch.backgroundIdle(id);
    expect(pauseStored(orch.get(id))).toBe(true);
    await orch.connect(id, 60);
    expect(pauseStored(orch.get(id))).toBe(false);
    node.storage.faults.failNext('save');
    await orch.pause(id);
    await orch.backgroundIdle(id);
    expect(orch.get(id).state).toBe('paused');
    expect(pauseStored(orch.get(id))).toBe(false);
  });

  it('a pause asked to wait until stored answers once the repository holds it', async () => {
    const { node, id, orch } = await FakeNode.withRunning({}, {}, { mem: '1' });
    const save = node.storage.faults.hold('save');
    let answered = false;
    const pausing = orch.pause(id, 'request', 'memory', true).then(() => (answered = true));
    await save.reached;
    expect(orch.get(id).state).toBe('paused');
    expect(answered).toBe(false);
    save.release();
    await pausing;
    expect(pauseStored(orch.get(id))).toBe(true);
  });
});
