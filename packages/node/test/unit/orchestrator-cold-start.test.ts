import { describe, expect, it } from 'vitest';
import { FakeNode } from '@agentenv/test-support/fakes';

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
});
