import { describe, expect, it } from 'vitest';
import { errorBody } from '@agentenv/common';
import {
  fakeCaptureMeta,
  FakeNode,
  sandboxRecord,
  type FakeCapture,
  rejection as failure,
} from '@agentenv/test-support/fakes';
import { DEFAULT_RESOURCES } from '../../src/runtime/index.js';
import { SANDBOX_STATES, type SandboxState } from '../../src/orchestrator/states.js';
import { recoveryOf } from '../../src/orchestrator/recovery.js';
import type { SandboxRecord } from '../../src/orchestrator/record.js';

const capture = (mem: string, complete = true): FakeCapture => ({
  meta: fakeCaptureMeta('old', DEFAULT_RESOURCES, '2026-01-01T00:00:00.000Z'),
  state: { mem },
  complete,
});

type Local = 'none' | 'complete' | 'partial';

/**
 * A record as a crashed node left it: in `state`, with a local capture (complete, cut short, or
 * none) and/or a stored pause. The local capture holds `local`, the stored pause `stored`, so a
 * resume shows which one it came from.
 */
function leftBehind(node: FakeNode, id: string, state: SandboxState, local: Local, pause: boolean): void {
  const rec: SandboxRecord = sandboxRecord({ sandboxId: id, state });
  if (local !== 'none') {
    rec.captureDir = `/captures/${id}/pause-0`;
    node.disk.write(rec.captureDir, capture('local', local === 'complete'));
  }
  if (pause) {
    rec.pauseId = `stored${id}`;
    const { state: _s, captureDir: _c, pauseId: _p, ...sandbox } = rec;
    node.storage.put(rec.pauseId, { sandbox }, capture('stored'));
  }
  node.store.insert(rec);
}

describe('orchestrator: recovery after a crash', () => {
  const cases = SANDBOX_STATES.flatMap((state) =>
    (['none', 'complete', 'partial'] as const).flatMap((local) =>
      [true, false].map((pause) => ({ state, local, pause })),
    ),
  );

  it('decides each record from its state, its local capture and its stored pause', async () => {
    const crashed = new FakeNode();
    const ids = cases.map((_, i) => `sbx${String(i).padStart(3, '0')}`);
    cases.forEach((c, i) => leftBehind(crashed, ids[i]!, c.state, c.local, c.pause));
    const node = crashed.restart();
    const result = node.orchestrator.recover();
    await node.orchestrator.backgroundIdle();
    let paused = 0;
    for (const [i, c] of cases.entries()) {
      const id = ids[i]!;
      const between = c.state === 'paused' || c.state === 'pausing' || c.state === 'resuming';
      // A local capture named in the record is the newest state; without one, the stored pause.
      const from =
        c.local !== 'none' ? (c.local === 'complete' ? 'local' : undefined) : c.pause ? 'stored' : undefined;
      const label = JSON.stringify(c);
      if (between && from) {
        paused++;
        expect(node.orchestrator.get(id).state, label).toBe('paused');
        expect(
          recoveryOf({ ...node.orchestrator.get(id), state: c.state }, c.local === 'complete'),
          label,
        ).toBe('paused');
        await node.orchestrator.connect(id, 60);
        const rec = node.orchestrator.get(id);
        expect(node.driver.state(rec.handle!.id).mem, label).toBe(from);
        expect(node.captures.of(id), label).toEqual([]);
        await node.orchestrator.kill(id);
      } else {
        expect(node.orchestrator.find(id), label).toBeUndefined();
        expect(result.lost, label).toContain(id);
        expect(node.captures.of(id), label).toEqual([]);
        expect(node.storage.pauses.has(`stored${id}`), label).toBe(false);
        expect(node.observer.of(id), label).toEqual(['lost:node_restart']);
      }
    }
    expect(result.paused).toBe(paused);
    expect(node.storage.pauses.size).toBe(0);
  });

  it('a crash after a pause answered, before its checkpoint ended, leaves it paused with its memory', async () => {
    const old = new FakeNode();
    const rec = await old.create();
    old.driver.write(rec.handle!.id, 'mem', 'suspended');
    const held = old.driver.faults.hold('checkpoint');
    await old.orchestrator.pause(rec.sandboxId);
    await held.reached;
    expect(old.orchestrator.get(rec.sandboxId)).toMatchObject({
      state: 'paused',
      captureDir: expect.any(String),
    });
    // The runtime of the next start takes the checkpoint the suspended sandbox was owed.
    const node = old.restart();
    expect(node.orchestrator.recover()).toEqual({ paused: 1, lost: [] });
    await node.orchestrator.connect(rec.sandboxId, 60);
    expect(node.driver.state(node.orchestrator.get(rec.sandboxId).handle!.id).mem).toBe('suspended');
    expect(node.captures.of(rec.sandboxId)).toEqual([]);
  });

  for (const step of ['save', 'keep'] as const) {
    it(`a crash while the pause is being stored (${step}) leaves it paused with its memory`, async () => {
      const old = new FakeNode();
      const rec = await old.create();
      old.driver.write(rec.handle!.id, 'mem', 'before-crash');
      const held = old.storage.faults.hold(step);
      void old.orchestrator.pause(rec.sandboxId);
      await held.reached;
      const node = old.restart();
      expect(node.orchestrator.recover()).toEqual({ paused: 1, lost: [] });
      await node.orchestrator.connect(rec.sandboxId, 60);
      expect(node.driver.state(node.orchestrator.get(rec.sandboxId).handle!.id).mem).toBe('before-crash');
      expect(node.captures.of(rec.sandboxId)).toEqual([]);
    });
  }

  it('a crash during a resume leaves it paused, resumable again', async () => {
    const old = new FakeNode();
    const rec = await old.create();
    old.driver.write(rec.handle!.id, 'mem', 'kept');
    await old.orchestrator.pause(rec.sandboxId);
    const held = old.driver.faults.hold('restore');
    void old.orchestrator.connect(rec.sandboxId, 60);
    await held.reached;
    expect(old.orchestrator.get(rec.sandboxId).state).toBe('resuming');
    const node = old.restart();
    expect(node.orchestrator.recover()).toEqual({ paused: 1, lost: [] });
    await node.orchestrator.connect(rec.sandboxId, 60);
    expect(node.driver.state(node.orchestrator.get(rec.sandboxId).handle!.id).mem).toBe('kept');
  });

  it('a node that stops with sandboxes running reports them lost at start, and drops their pauses', async () => {
    const old = new FakeNode();
    const rec = await old.create();
    await old.orchestrator.pause(rec.sandboxId);
    await old.orchestrator.connect(rec.sandboxId, 60);
    const pauseId = old.orchestrator.get(rec.sandboxId).pauseId!;
    const node = old.restart();
    expect(node.orchestrator.recover()).toEqual({ paused: 0, lost: [rec.sandboxId] });
    await node.orchestrator.backgroundIdle();
    expect(node.storage.pauses.has(pauseId)).toBe(false);
  });
});

describe('orchestrator: takeover by another node', () => {
  it('a sandbox paused on A resumes on B with its memory; A then no longer has it', async () => {
    const a = new FakeNode();
    const b = a.peer();
    const rec = await a.create();
    a.driver.write(rec.handle!.id, 'mem', 'from-a');
    await a.orchestrator.pause(rec.sandboxId, 'request', 'memory', true);
    expect(b.orchestrator.find(rec.sandboxId)).toBeUndefined();
    expect(await b.orchestrator.connect(rec.sandboxId, 60)).toBe(true);
    expect(b.driver.state(b.orchestrator.get(rec.sandboxId).handle!.id).mem).toBe('from-a');
    const err = await failure(a.orchestrator.connect(rec.sandboxId, 60));
    expect(errorBody(err)).toMatchObject({ status: 404 });
    expect(errorBody(err).body.message).toMatch(/on another node/);
    expect(a.orchestrator.find(rec.sandboxId)).toBeUndefined();
    expect(a.disk.list('/captures')).toEqual([]);

    // Paused again on B, it can come back to A.
    b.driver.write(b.orchestrator.get(rec.sandboxId).handle!.id, 'mem', 'from-b');
    await b.orchestrator.pause(rec.sandboxId, 'request', 'memory', true);
    expect(await a.orchestrator.connect(rec.sandboxId, 60)).toBe(true);
    expect(a.driver.state(a.orchestrator.get(rec.sandboxId).handle!.id).mem).toBe('from-b');
  });

  it('of two nodes asked at once, one resumes it and the other answers 404', async () => {
    const a = new FakeNode();
    const b = a.peer();
    const c = a.peer();
    const rec = await a.create();
    await a.orchestrator.pause(rec.sandboxId);
    await a.orchestrator.kill(rec.sandboxId).catch(() => undefined);
    const again = await a.create();
    await a.orchestrator.pause(again.sandboxId, 'request', 'memory', true);
    const results = await Promise.allSettled([
      b.orchestrator.connect(again.sandboxId, 60),
      c.orchestrator.connect(again.sandboxId, 60),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled' && r.value === true);
    expect(won).toHaveLength(1);
    expect([b, c].filter((n) => n.orchestrator.find(again.sandboxId)?.state === 'running')).toHaveLength(1);
  });

  it('refuses a pause that a newer node wrote, saying so', async () => {
    const a = new FakeNode();
    a.storage.put(
      'pausenew',
      {
        sandbox: {
          version: 2,
          sandboxId: 'newer',
          templateId: 'base',
          startedAt: 'x',
          endAt: 'y',
          envdVersion: '9',
        },
      },
      capture('x'),
    );
    const err = await failure(a.orchestrator.connect('newer', 60));
    expect(errorBody(err)).toMatchObject({ status: 409 });
    expect(errorBody(err).body.message).toMatch(/record version 2, newer than this node reads \(1\)/);
    expect(a.orchestrator.find('newer')).toBeUndefined();
  });
});
