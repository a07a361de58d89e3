import { describe, expect, it } from 'vitest';
import { errorBody } from '@agentenv/common';
import { FakeNode, rejection as failure } from '@agentenv/test-support/fakes';

/**
 * Two nodes on one repository (A paused the sandbox, B is asked for it) while A's pause upload
 * is at each of its steps: whatever the interleaving, exactly one node ends up running it.
 */

/** A with a running sandbox holding `mem: a`, B its peer. */
async function twoNodes() {
  const { node: a, id } = await FakeNode.withRunning({}, {}, { mem: 'a' });
  return { a, b: a.peer(), id };
}

/** The nodes on which the sandbox runs, by the records and by the runtimes. */
function runningOn(id: string, ...nodes: FakeNode[]): FakeNode[] {
  const running = nodes.filter((n) => n.orchestrator.find(id)?.state === 'running');
  const live = nodes.filter((n) => n.driver.running().length > 0);
  expect(live).toEqual(running);
  return running;
}

async function expectGoneOnAnotherNode(p: Promise<unknown>): Promise<void> {
  const err = await failure(p);
  expect(errorBody(err)).toMatchObject({ status: 404 });
}

describe('pause claims: an upload racing a connect on another node', () => {
  it('before the pause is stored, B finds nothing to resume; A resumes', async () => {
    const { a, b, id } = await twoNodes();
    const save = a.storage.faults.hold('save');
    await a.orchestrator.pause(id);
    await save.reached;
    await expectGoneOnAnotherNode(b.orchestrator.connect(id, 60));
    expect(await a.orchestrator.connect(id, 60)).toBe(true);
    save.release();
    await a.orchestrator.backgroundIdle();
    expect(runningOn(id, a, b)).toEqual([a]);
    expect(a.storage.pauses.size).toBe(0);
  });

  it('a pause stored but not yet recorded by A is A’s: B is refused, A resumes its local capture', async () => {
    const { a, b, id } = await twoNodes();
    const committed = a.storage.faults.hold('committed');
    await a.orchestrator.pause(id);
    await committed.reached;
    expect(a.storage.pauses.size).toBe(1);
    await expectGoneOnAnotherNode(b.orchestrator.connect(id, 60));
    expect(await a.orchestrator.connect(id, 60)).toBe(true);
    committed.release();
    await a.orchestrator.backgroundIdle();
    expect(runningOn(id, a, b)).toEqual([a]);
    expect(a.driver.state(a.orchestrator.get(id).handle!.id)).toMatchObject({ mem: 'a' });
    // The upload found the sandbox running and dropped its pause: nobody can resume it again.
    expect(a.storage.pauses.size).toBe(0);
    expect(a.storage.claims.size).toBe(0);
  });

  it('a pause stored while A resumes (the upload waits for the lock) stays A’s', async () => {
    const { a, b, id } = await twoNodes();
    const committed = a.storage.faults.hold('committed');
    await a.orchestrator.pause(id);
    await committed.reached;
    const restore = a.driver.faults.hold('restore');
    const resuming = a.orchestrator.connect(id, 60);
    await restore.reached;
    committed.release();
    await expectGoneOnAnotherNode(b.orchestrator.connect(id, 60));
    restore.release();
    expect(await resuming).toBe(true);
    await a.orchestrator.backgroundIdle();
    expect(runningOn(id, a, b)).toEqual([a]);
    expect(a.storage.pauses.size).toBe(0);
  });

  it('once the pause is A’s state, B takes it over and a connect waiting on A is refused', async () => {
    const { a, b, id } = await twoNodes();
    const keep = a.storage.faults.hold('keep');
    await a.orchestrator.pause(id);
    // The upload holds A's lock, after the pause became the state and was released.
    await keep.reached;
    const onA = a.orchestrator.connect(id, 60);
    expect(await b.orchestrator.connect(id, 60)).toBe(true);
    keep.release();
    await expectGoneOnAnotherNode(onA);
    await a.orchestrator.backgroundIdle();
    expect(runningOn(id, a, b)).toEqual([b]);
    expect(b.driver.state(b.orchestrator.get(id).handle!.id)).toMatchObject({ mem: 'a' });
    expect(a.orchestrator.find(id)).toBeUndefined();
  });

  it('connects on A and B at once after the upload: exactly one resumes', async () => {
    const { a, b, id } = await twoNodes();
    await a.orchestrator.pause(id);
    await a.orchestrator.backgroundIdle();
    const results = await Promise.allSettled([
      a.orchestrator.connect(id, 60),
      b.orchestrator.connect(id, 60),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(runningOn(id, a, b)).toHaveLength(1);
  });

  it('a second pause: B is refused while it uploads, since A holds the previous one too', async () => {
    const { a, b, id } = await twoNodes();
    await a.orchestrator.pause(id);
    await a.orchestrator.backgroundIdle();
    await a.orchestrator.connect(id, 60);
    const save = a.storage.faults.hold('save');
    await a.orchestrator.pause(id);
    await save.reached;
    await expectGoneOnAnotherNode(b.orchestrator.connect(id, 60));
    save.release();
    await a.orchestrator.backgroundIdle();
    expect(await b.orchestrator.connect(id, 60)).toBe(true);
    expect(runningOn(id, a, b)).toEqual([b]);
  });

  it('a kill on A leaves the pause that B took over', async () => {
    const { a, b, id } = await twoNodes();
    await a.orchestrator.pause(id);
    await a.orchestrator.backgroundIdle();
    const pauseId = a.orchestrator.get(id).pauseId!;
    await b.orchestrator.connect(id, 60);
    await a.orchestrator.kill(id);
    await a.orchestrator.backgroundIdle();
    expect(a.storage.pauses.has(pauseId)).toBe(true);
    await b.orchestrator.pause(id);
    await b.orchestrator.backgroundIdle();
    expect(await b.orchestrator.connect(id, 60)).toBe(true);
    expect(runningOn(id, a, b)).toEqual([b]);
  });

  it('a resume that fails on A leaves the pause to B', async () => {
    const { a, b, id } = await twoNodes();
    await a.orchestrator.pause(id);
    await a.orchestrator.backgroundIdle();
    a.driver.faults.failNext('restore');
    await failure(a.orchestrator.connect(id, 60));
    expect(a.orchestrator.get(id).state).toBe('paused');
    expect(await b.orchestrator.connect(id, 60)).toBe(true);
    await expectGoneOnAnotherNode(a.orchestrator.connect(id, 60));
    expect(runningOn(id, a, b)).toEqual([b]);
  });
});
