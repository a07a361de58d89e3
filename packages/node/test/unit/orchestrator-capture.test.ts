import { describe, expect, it } from 'vitest';
import { DomainError, errorBody } from '@agentenv/common';
import { FakeNode, rejection as failure, type FakeNodeOptions } from '@agentenv/test-support/fakes';

/** A node with one running, secure sandbox whose state holds `mem: parent`. */
const running = (opts: FakeNodeOptions = {}) =>
  FakeNode.withRunning(opts, { secure: true, metadata: { m: '1' } }, { mem: 'parent' });

describe('orchestrator: snapshot', () => {
  it('stores a capture of the running sandbox, which runs on unchanged; creates start from it', async () => {
    const { node, id, orch, rec } = await running();
    const info = await orch.snapshot(id, 'snap-a');
    expect(info).toMatchObject({ names: ['snap-a'], sourceSandboxId: id, templateId: 'base' });
    expect(orch.get(id)).toMatchObject({
      state: 'running',
      endAt: rec.endAt,
      handle: { id: rec.handle!.id },
    });
    expect(node.captures.of(id)).toEqual([]);
    expect(node.observer.of(id).at(-1)).toBe('snapshot:request');
    const child = await node.create({ source: { kind: 'named', name: 'snap-a' } });
    expect(node.driver.state(child.handle!.id)).toMatchObject({ mem: 'parent' });
    // The snapshot's envd token is the one set inside its capture: /init is authorised with it.
    expect(node.envd.inits.at(-1)!.token).toBe(rec.envdAccessToken);
  });

  it('a failed checkpoint leaves the sandbox running', async () => {
    const { node, id, orch } = await running();
    node.driver.faults.failNext('checkpoint');
    await failure(orch.snapshot(id));
    expect(orch.get(id).state).toBe('running');
    expect(node.captures.of(id)).toEqual([]);
  });

  it('a repository failure is a 503 naming the repository; the capture goes, the sandbox runs', async () => {
    const { node, id, orch } = await running();
    node.snapshots.faults.failNext('take');
    const r = errorBody(await failure(orch.snapshot(id)));
    expect(r.status).toBe(503);
    expect(r.body.message).toMatch(/snapshot repository/);
    expect(orch.get(id).state).toBe('running');
    expect(node.captures.of(id)).toEqual([]);
    expect(node.observer.failures).toContain('snapshot');
  });

  it('a name in use is a 409', async () => {
    const { id, orch } = await running();
    await orch.snapshot(id, 'taken');
    expect(errorBody(await failure(orch.snapshot(id, 'taken'))).status).toBe(409);
    expect(orch.get(id).state).toBe('running');
  });
});

describe('orchestrator: fork', () => {
  it('starts independent children with the parent state and settings; the parent runs on', async () => {
    const { node, id, orch, rec } = await running();
    const results = await orch.fork(id, 3, undefined);
    expect(results).toHaveLength(3);
    const children = results.map((r) => ('sandbox' in r ? r.sandbox : expect.fail(String(r.error))));
    expect(new Set(children.map((c) => c.sandboxId)).size).toBe(3);
    for (const c of children) {
      expect(c).toMatchObject({ state: 'running', templateId: 'base', metadata: { m: '1' }, secure: true });
      expect(c.envdAccessToken).not.toBe(rec.envdAccessToken);
      expect(node.driver.state(c.handle!.id)).toMatchObject({ mem: 'parent' });
      expect(node.observer.events.find((e) => e.sandboxId === c.sandboxId)?.details).toMatchObject({
        parent_sandbox_id: id,
      });
    }
    node.driver.write(children[0]!.handle!.id, 'mem', 'child');
    expect(node.driver.state(children[1]!.handle!.id).mem).toBe('parent');
    expect(orch.get(id)).toMatchObject({ state: 'running', handle: { id: rec.handle!.id } });
    expect(node.slots.used).toBe(4);
    expect(node.captures.of(id)).toEqual([]);
    expect(node.observer.of(id).at(-1)).toBe('forked:request');
    // Children keep the parent's time left unless told otherwise.
    expect(children[0]!.endAt).toBe(rec.endAt);
  });

  it('reports a child that failed as an error of its own, and the others start', async () => {
    const { node, id, orch } = await running({ maxSandboxes: 3 });
    node.driver.faults.failNext('restore');
    const results = await orch.fork(id, 3, 60);
    const errors = results.flatMap((r) => ('error' in r ? [r.error] : []));
    expect(errors).toHaveLength(2);
    // One child could not be restored; one was refused: the node runs its maximum.
    expect(errors.map((e) => errorBody(e).status).sort()).toEqual([429, 500]);
    expect(errors.every((e) => e instanceof DomainError)).toBe(true);
    expect(node.slots.used).toBe(2);
    expect(orch.get(id).state).toBe('running');
  });

  it('refuses bad counts and parents that do not run', async () => {
    const { id, orch } = await running({ forkMaxChildren: 4 });
    for (const n of [0, 5, 1.5])
      expect(errorBody(await failure(orch.fork(id, n, undefined))).body.message).toMatch(/between 1 and 4/);
    await orch.pause(id);
    expect(errorBody(await failure(orch.fork(id, 1, undefined))).status).toBe(409);
  });

  it('a failed checkpoint leaves the parent running and starts no child', async () => {
    const { node, id, orch } = await running();
    node.driver.faults.failNext('checkpoint');
    await failure(orch.fork(id, 2, undefined));
    expect(orch.get(id).state).toBe('running');
    expect(orch.list()).toHaveLength(1);
    // The slots built for the children are given back.
    expect(node.slots.used).toBe(1);
  });

  it('builds the network slots of the children while the parent is checkpointed, not after', async () => {
    const { node, id, orch } = await running();
    const held = node.driver.faults.hold('checkpoint');
    const fork = orch.fork(id, 3, undefined);
    await held.reached;
    await new Promise((r) => setImmediate(r));
    expect(node.slots.used).toBe(4);
    held.release();
    expect((await fork).every((r) => 'sandbox' in r)).toBe(true);
    expect(node.slots.used).toBe(4);
  });

  it('a child whose slot built ahead failed builds its own', async () => {
    const { node, id, orch } = await running();
    node.slots.faults.failNext('acquire');
    const results = await orch.fork(id, 2, undefined);
    expect(results.every((r) => 'sandbox' in r)).toBe(true);
    expect(node.slots.used).toBe(3);
  });

  it('holds the parent in forking only for the checkpoint', async () => {
    const { node, id, orch } = await running();
    const held = node.driver.faults.hold('restore');
    const fork = orch.fork(id, 1, undefined);
    await held.reached;
    expect(orch.get(id).state).toBe('running');
    held.release();
    await fork;
  });
});
