import { describe, expect, it } from 'vitest';
import { DomainError, errorBody } from '@agentenv/common';
import {
  FakeNode,
  FakePauses,
  rejection as failure,
  type FakeNodeOptions,
} from '@agentenv/test-support/fakes';

/** A node with one running sandbox whose state holds `mem: 1`. */
const running = (opts: FakeNodeOptions = {}) => FakeNode.withRunning(opts, {}, { mem: '1' });

/** A running sandbox paused, its pause answered and its checkpoint held until `held.release()`. */
async function pausedMidCheckpoint() {
  const { node, id, orch } = await running();
  const handle = orch.get(id).handle!;
  const held = node.driver.faults.hold('checkpoint');
  await orch.pause(id);
  await held.reached;
  return { node, id, orch, handle, held };
}

/** A running sandbox paused, its pause answered and its checkpoint failed: it stays suspended. */
async function pausedCheckpointFailed() {
  const { node, id, orch } = await running();
  const handle = orch.get(id).handle!;
  node.driver.faults.failNext('checkpoint');
  await orch.pause(id);
  await orch.backgroundIdle(id);
  return { node, id, orch, handle };
}

describe('orchestrator: pause', () => {
  it('checkpoints, releases the slot, stores the pause and keeps it in the cache', async () => {
    const { node, id, orch } = await running();
    await orch.pause(id);
    await orch.backgroundIdle(id);
    const rec = orch.get(id);
    expect(rec.state).toBe('paused');
    expect(rec.handle).toBeUndefined();
    expect(rec.captureDir).toBeUndefined();
    expect(node.driver.running()).toEqual([]);
    expect(node.slots.used).toBe(0);
    expect(node.storage.pauses.has(rec.pauseId!)).toBe(true);
    expect(node.disk.has(FakePauses.cacheDir(rec.pauseId!))).toBe(true);
    expect(node.captures.of(id)).toEqual([]);
    expect(orch.target(id)).toBeUndefined();
    expect(node.observer.of(id)).toEqual(['created:request', 'paused:request']);
    expect(errorBody(await failure(orch.pause(id))).status).toBe(409);
  });

  it('a failed suspend leaves the sandbox running, with its slot and no capture', async () => {
    const { node, id, orch } = await running();
    node.driver.faults.failNext('pause');
    const err = (await failure(orch.pause(id))) as DomainError;
    expect(err.kind).toBe('runtime_failure');
    expect(err.message).toMatch(/^pause failed: fake/);
    const rec = orch.get(id);
    expect(rec).toMatchObject({ state: 'running' });
    expect(rec.captureDir).toBeUndefined();
    expect(node.slots.used).toBe(1);
    expect(node.captures.of(id)).toEqual([]);
    expect(orch.target(id)).toBeDefined();
    await orch.pause(id);
    await orch.backgroundIdle(id);
  });

  it('answers once the sandbox is suspended; the checkpoint, the release and the store follow', async () => {
    const { node, id, orch, handle, held } = await pausedMidCheckpoint();
    expect(orch.get(id)).toMatchObject({ state: 'paused', uploadPending: true });
    expect(await node.driver.status(handle)).toBe('paused');
    expect(node.slots.used).toBe(1);
    expect(orch.target(id)).toBeUndefined();
    held.release();
    await orch.backgroundIdle(id);
    expect(await node.driver.status(handle)).toBe('stopped');
    expect(node.slots.used).toBe(0);
    expect(node.storage.pauses.has(orch.get(id).pauseId!)).toBe(true);
  });

  it('a resume during the checkpoint runs the suspended sandbox on, once the checkpoint ended', async () => {
    const { node, id, orch, handle, held } = await pausedMidCheckpoint();
    node.driver.write(handle.id, 'mem', 'held');
    const resumed = orch.connect(id, 60);
    held.release();
    expect(await resumed).toBe(true);
    await orch.backgroundIdle(id);
    const rec = orch.get(id);
    expect(rec).toMatchObject({ state: 'running', handle: { id: handle.id } });
    expect(rec.captureDir).toBeUndefined();
    expect(node.driver.state(handle.id).mem).toBe('held');
    expect(node.captures.of(id)).toEqual([]);
    expect(node.storage.pauses.size).toBe(0);
    expect(node.slots.used).toBe(1);
  });

  it('a failed checkpoint after the answer keeps the sandbox suspended: a resume runs it on', async () => {
    const { node, id, orch, handle } = await pausedCheckpointFailed();
    expect(orch.get(id).state).toBe('paused');
    expect(await node.driver.status(handle)).toBe('paused');
    expect(node.storage.pauses.size).toBe(0);
    expect(await orch.connect(id, 60)).toBe(true);
    expect(orch.get(id).handle!.id).toBe(handle.id);
    expect(await node.driver.status(handle)).toBe('running');
  });

  it('egress rules changed while it is suspended hold when it runs on', async () => {
    const { node, id, orch, handle, held } = await pausedMidCheckpoint();
    const net = handle.net as never;
    const rules = { allowInternet: false, allowOut: [], denyOut: [] };
    await orch.setNetwork(id, rules);
    expect(node.slots.egressOf(net)).toEqual(rules);
    const resumed = orch.connect(id, 60);
    held.release();
    await resumed;
    expect(orch.get(id).handle!.net).toEqual(net);
    expect(node.slots.egressOf(net)).toEqual(rules);
  });

  it('a suspended sandbox that dies without a complete checkpoint is gone, with its slot', async () => {
    const { node, id, orch, handle } = await pausedCheckpointFailed();
    node.driver.crash(handle.id);
    await orch.backgroundIdle();
    expect(orch.find(id)).toBeUndefined();
    expect(node.slots.used).toBe(0);
    expect(node.observer.of(id)).toEqual(['created:request', 'paused:request', 'exited:runtime_exit']);
  });

  it('a shutdown gives a failed checkpoint one more try, then stores the pause', async () => {
    const { node, id, orch } = await pausedCheckpointFailed();
    expect(node.storage.pauses.size).toBe(0);
    await orch.shutdown();
    const rec = orch.get(id);
    expect(rec).toMatchObject({ state: 'paused' });
    expect(rec.uploadPending).toBeUndefined();
    expect(node.storage.pauses.has(rec.pauseId!)).toBe(true);
    expect(node.driver.running()).toEqual([]);
  });

  it('a kill during the checkpoint waits for it, then stops the sandbox and drops the capture', async () => {
    const { node, id, orch, handle, held } = await pausedMidCheckpoint();
    const killed = orch.kill(id);
    held.release();
    await killed;
    await orch.backgroundIdle();
    expect(orch.find(id)).toBeUndefined();
    expect(await node.driver.status(handle)).toBe('stopped');
    expect(node.slots.used).toBe(0);
    expect(node.captures.of(id)).toEqual([]);
    expect(node.storage.pauses.size).toBe(0);
  });

  it('keeps the pause on this node when the repository fails, and drops the older stored pause', async () => {
    const { node, id, orch } = await running();
    await orch.pause(id);
    await orch.backgroundIdle(id);
    const first = orch.get(id).pauseId!;
    await orch.connect(id, 60);
    node.storage.faults.failNext('save');
    await orch.pause(id);
    await orch.backgroundIdle(id);
    const rec = orch.get(id);
    expect(rec.state).toBe('paused');
    expect(rec.pauseId).toBeUndefined();
    expect(node.captures.complete(rec.captureDir!)).toBe(true);
    expect(node.storage.pauses.has(first)).toBe(false);
    await orch.connect(id, 60);
    expect(node.driver.state(orch.get(id).handle!.id)).toMatchObject({ mem: '1' });
    expect(node.captures.of(id)).toEqual([]);
  });

  it('resumes from the local capture when the cache had no room for it', async () => {
    const { node, id, orch } = await running();
    node.storage.faults.failNext('keep');
    await orch.pause(id);
    await orch.backgroundIdle(id);
    const rec = orch.get(id);
    expect(rec.pauseId).toBeDefined();
    expect(node.captures.complete(rec.captureDir!)).toBe(true);
    await orch.connect(id, 60);
    expect(node.driver.running()[0]!.restoredFrom).toBe(rec.captureDir);
  });
});

describe('orchestrator: resume', () => {
  it('restores the memory and files it had, in a new slot, with a new end time', async () => {
    const { node, id, orch } = await running();
    await orch.pause(id);
    await orch.backgroundIdle(id);
    node.clock.advance(10_000);
    expect(await orch.connect(id, 60)).toBe(true);
    const rec = orch.get(id);
    expect(rec.state).toBe('running');
    expect(Date.parse(rec.endAt)).toBe(node.clock.now() + 60_000);
    expect(node.driver.state(rec.handle!.id)).toMatchObject({ mem: '1', template: 'base' });
    expect(node.slots.used).toBe(1);
    expect(node.observer.of(id).at(-1)).toBe('resumed:request');
  });

  it('a connect to a running sandbox only extends its life (or sets it, for the old resume)', async () => {
    const { node, id, orch } = await running();
    const end = orch.get(id).endAt;
    expect(await orch.connect(id, 10)).toBe(false);
    expect(orch.get(id).endAt).toBe(end);
    expect(await orch.connect(id, 600)).toBe(false);
    expect(Date.parse(orch.get(id).endAt)).toBe(node.clock.now() + 600_000);
    await orch.connect(id, 10, { endTime: 'set' });
    expect(Date.parse(orch.get(id).endAt)).toBe(node.clock.now() + 10_000);
  });

  for (const step of ['restore', 'acquire', 'open'] as const) {
    it(`a failed ${step} leaves it paused and resumable, holding no slot`, async () => {
      const { node, id, orch } = await running();
      await orch.pause(id);
      await orch.backgroundIdle(id);
      const before = orch.get(id);
      // The cache entry goes, so the resume must open the pause from the repository.
      if (step === 'open') node.disk.delete(FakePauses.cacheDir(before.pauseId!));
      if (step === 'restore') node.driver.faults.failNext('restore');
      if (step === 'acquire') node.slots.faults.failNext('acquire');
      if (step === 'open') node.storage.faults.failNext('open');
      await failure(orch.connect(id, 60));
      expect(orch.get(id)).toEqual(before);
      expect(node.slots.used).toBe(0);
      expect(node.driver.running()).toEqual([]);
      expect(await orch.connect(id, 60)).toBe(true);
      expect(node.driver.state(orch.get(id).handle!.id)).toMatchObject({ mem: '1' });
    });
  }

  it('a reboot of a running sandbox changes nothing but its end time', async () => {
    const { node, id, orch } = await running();
    const handle = orch.get(id).handle;
    expect(await orch.connect(id, 600, { boot: 'reboot' })).toBe(false);
    expect(orch.get(id).handle).toEqual(handle);
    expect(Date.parse(orch.get(id).endAt)).toBe(node.clock.now() + 600_000);
  });

  it('a reboot whose files cannot be read out leaves it paused and resumable, with nothing left over', async () => {
    const { node, id, orch } = await running();
    await orch.pause(id);
    await orch.backgroundIdle(id);
    const before = orch.get(id);
    const captures = node.captures.of(id);
    // The fake envd runs no commands, so reading the files out of the restored copy fails.
    expect(String(await failure(orch.connect(id, 60, { boot: 'reboot' })))).toMatch(/exec/);
    expect(orch.get(id)).toEqual(before);
    expect(node.captures.of(id)).toEqual(captures);
    expect(node.slots.used).toBe(0);
    expect(node.driver.running()).toEqual([]);
    expect(await orch.connect(id, 60)).toBe(true);
    expect(node.driver.state(orch.get(id).handle!.id)).toMatchObject({ mem: '1' });
  });

  it('a capacity refusal during a resume is a 429 with Retry-After, and leaves it paused', async () => {
    const { node, id, orch } = await running({ maxSandboxes: 1 });
    await orch.pause(id);
    await orch.backgroundIdle(id);
    await node.create();
    expect(errorBody(await failure(orch.connect(id, 60)))).toMatchObject({ status: 429, retryAfter: 5 });
    expect(orch.get(id).state).toBe('paused');
  });

  it('refuses a paused sandbox with no capture anywhere as an internal error, still paused', async () => {
    const { node, id, orch } = await running();
    await orch.pause(id);
    await orch.backgroundIdle(id);
    const { pauseId: _p, ...rec } = orch.get(id);
    node.store.putRaw(id, rec);
    const err = (await failure(orch.connect(id, 60))) as DomainError;
    expect(err).toMatchObject({ kind: 'internal' });
    expect(err.message).toMatch(/has no capture/);
    expect(orch.get(id).state).toBe('paused');
  });
});

describe('orchestrator: kill', () => {
  it('kills a running sandbox and releases its slot and its stored pause', async () => {
    const { node, id, orch } = await running();
    await orch.pause(id);
    await orch.backgroundIdle(id);
    await orch.connect(id, 60);
    const pauseId = orch.get(id).pauseId!;
    await orch.kill(id);
    expect(orch.find(id)).toBeUndefined();
    expect(node.driver.running()).toEqual([]);
    expect(node.slots.used).toBe(0);
    expect(node.storage.pauses.has(pauseId)).toBe(false);
    expect(node.observer.of(id).at(-1)).toBe('killed:request');
    expect(errorBody(await failure(orch.kill(id))).status).toBe(404);
  });

  it('kills a paused sandbox: its local capture and stored pause go', async () => {
    const { node, id, orch } = await running();
    node.storage.faults.failNext('keep');
    await orch.pause(id);
    await orch.backgroundIdle(id);
    const { pauseId } = orch.get(id);
    await orch.kill(id);
    expect(node.captures.of(id)).toEqual([]);
    expect(node.storage.pauses.has(pauseId!)).toBe(false);
    expect(node.disk.list('/cache')).toEqual([]);
  });

  it('a failed kill leaves the sandbox running and reachable, and a second kill works', async () => {
    const { node, id, orch } = await running();
    node.driver.faults.failNext('kill');
    await failure(orch.kill(id));
    expect(orch.get(id).state).toBe('running');
    expect(orch.target(id)).toBeDefined();
    expect(node.slots.used).toBe(1);
    await orch.kill(id);
    expect(node.slots.used).toBe(0);
  });

  it('a failed slot release does not keep a killed sandbox', async () => {
    const { node, id, orch } = await running();
    node.slots.faults.failNext('release');
    await orch.kill(id);
    expect(orch.find(id)).toBeUndefined();
  });
});

describe('orchestrator: settings', () => {
  it('sets and extends the end time of running sandboxes only', async () => {
    const { node, id, orch } = await running();
    await orch.setTimeout(id, 5);
    expect(Date.parse(orch.get(id).endAt)).toBe(node.clock.now() + 5000);
    await orch.refresh(id, 1);
    expect(Date.parse(orch.get(id).endAt)).toBe(node.clock.now() + 5000);
    await orch.refresh(id, 50);
    expect(Date.parse(orch.get(id).endAt)).toBe(node.clock.now() + 50_000);
    await orch.pause(id);
    await orch.backgroundIdle(id);
    expect(errorBody(await failure(orch.setTimeout(id, 5))).status).toBe(409);
  });

  it('changes egress rules of the live slot and the record; a failure changes neither', async () => {
    const { node, id, orch } = await running();
    const rules = { allowInternet: false, allowOut: ['1.1.1.1/32'], denyOut: [] };
    await orch.setNetwork(id, rules);
    expect(orch.get(id).egress).toEqual(rules);
    expect(node.slots.egressOf(orch.get(id).handle!.net as never)).toEqual(rules);
    node.slots.faults.failNext('setEgress');
    await failure(orch.setNetwork(id, { ...rules, allowInternet: true }));
    expect(orch.get(id).egress).toEqual(rules);
    await orch.pause(id);
    await orch.backgroundIdle(id);
    await orch.setNetwork(id, { ...rules, denyOut: ['8.8.8.8'] });
    await orch.connect(id, 60);
    expect(orch.get(id).egress.denyOut).toEqual(['8.8.8.8']);
  });
});
