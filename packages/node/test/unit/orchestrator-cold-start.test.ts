import { describe, expect, it } from 'vitest';
import { errorBody } from '@agentenv/common';
import { FakeNode, rejection as failure } from '@agentenv/test-support/fakes';

const VOLUME = { name: 'data', path: '/mnt/data' };

describe('orchestrator: what a cold start with the files needs', () => {
  it('keeps since when its files differ from the template: its start, or its source sandbox’s', async () => {
    const { node, id, orch, rec } = await FakeNode.withRunning();
    expect(rec.filesSince).toBe(rec.startedAt);
    node.clock.advance(60_000);
    const snap = await orch.snapshot(id, 'later');
    expect(snap.filesSince).toBe(rec.startedAt);
    node.clock.advance(60_000);
    const fromSnapshot = await node.create({ source: { kind: 'named', name: 'later' } });
    expect(fromSnapshot.startedAt).not.toBe(rec.startedAt);
    expect(fromSnapshot.filesSince).toBe(rec.startedAt);
    const [forked] = await orch.fork(fromSnapshot.sandboxId, 1, undefined);
    expect(forked && 'sandbox' in forked ? forked.sandbox.filesSince : forked).toBe(rec.startedAt);
  });

  it('refuses a sandbox with volumes a filesystem-only pause or a reboot (400), leaving it as it was', async () => {
    const { node, id, orch } = await FakeNode.withRunning();
    node.store.putRaw(id, { ...orch.get(id), volumeMounts: [VOLUME] });
    const pause = errorBody(await failure(orch.pause(id, 'request', 'filesystem')));
    expect(pause).toMatchObject({ status: 400 });
    expect(pause.body.message).toMatch(/volumes mounted cannot pause without its memory/);
    expect(orch.get(id).state).toBe('running');

    await orch.pause(id);
    await orch.backgroundIdle(id);
    const before = orch.get(id);
    const reboot = errorBody(await failure(orch.connect(id, 60, { boot: 'reboot' })));
    expect(reboot).toMatchObject({ status: 400 });
    expect(reboot.body.message).toMatch(/volumes mounted cannot be rebooted/);
    expect(orch.get(id)).toEqual(before);
    expect(node.driver.running()).toEqual([]);
    expect(await orch.connect(id, 60)).toBe(true);
  });

  it('refuses a create with volumes whose timeout pauses without memory (400)', async () => {
    const node = new FakeNode();
    const err = errorBody(
      await failure(
        node.create({ autoPauseMemory: false, volumeMounts: [{ ...VOLUME, hostPath: '/var/lib/v/data' }] }),
      ),
    );
    expect(err).toMatchObject({ status: 400 });
    expect(err.body.message).toMatch(/autoPauseMemory=false/);
    expect(node.orchestrator.list()).toEqual([]);
  });
});
