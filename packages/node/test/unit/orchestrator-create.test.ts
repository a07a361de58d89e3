import { describe, expect, it } from 'vitest';
import { DomainError, errorBody } from '@agentenv/common';
import { FakeNode, FakeTemplates, rejection as failure } from '@agentenv/test-support/fakes';
import { NetworkError } from '../../src/network/index.js';

describe('orchestrator: create', () => {
  it('restores the template into a slot, initialises envd and records a running sandbox', async () => {
    const node = new FakeNode();
    const rec = await node.create({ envVars: { A: '1' }, metadata: { k: 'v' }, secure: true });
    expect(rec).toMatchObject({ state: 'running', templateId: 'base', alias: 'base', version: 1 });
    expect(node.orchestrator.get(rec.sandboxId).state).toBe('running');
    expect(node.slots.used).toBe(1);
    const [h] = node.driver.running();
    expect(h!.restoredFrom).toBe(FakeTemplates.dir('base', 1));
    const init = node.envd.initOf(h!.net!.hostAddress)!;
    expect(init.envVars).toMatchObject({ A: '1', E2B_SANDBOX: 'true', E2B_SANDBOX_ID: rec.sandboxId });
    expect(init.accessToken).toBe(rec.envdAccessToken);
    expect(init.defaultUser).toBe('user');
    expect(Date.parse(rec.endAt) - node.clock.now()).toBe(300_000);
    expect(node.observer.of(rec.sandboxId)).toEqual(['created:request']);
    expect(node.orchestrator.target(rec.sandboxId)?.address).toBe(h!.net!.hostAddress);
  });

  it('boots an image cold with the resources asked for', async () => {
    const node = new FakeNode();
    const resources = { cpuCount: 1, memoryMB: 512, diskSizeMB: 1024 };
    const rec = await node.create({ source: { kind: 'image', image: 'busybox:1', resources } });
    expect(rec).toMatchObject({ templateId: 'busybox:1', memoryMB: 512 });
    expect(node.driver.running()[0]!.restoredFrom).toBeUndefined();
  });

  it('names an unknown template and keeps nothing', async () => {
    const node = new FakeNode();
    const err = await failure(node.create({ source: { kind: 'named', name: 'nope' } }));
    expect(errorBody(err)).toMatchObject({ status: 400, body: { message: "template 'nope' not found" } });
    expect(node.orchestrator.list()).toEqual([]);
  });

  for (const step of ['acquire', 'restore', 'init'] as const) {
    it(`a failed ${step} leaves no record, runtime sandbox or slot behind`, async () => {
      const node = new FakeNode();
      if (step === 'acquire') node.slots.faults.failNext('acquire');
      if (step === 'restore') node.driver.faults.failNext('restore');
      if (step === 'init') node.envd.faults.failNext('init');
      const err = (await failure(node.create())) as DomainError;
      expect(err.message).toMatch(/^sandbox failed to start: fake/);
      expect(errorBody(err).status).toBe(500);
      expect(node.orchestrator.list()).toEqual([]);
      expect(node.driver.running()).toEqual([]);
      expect(node.slots.used).toBe(0);
      expect(node.observer.failures).toEqual(['create']);
    });
  }

  it('a runtime failure is a runtime failure, not a generic internal error', async () => {
    const node = new FakeNode();
    node.driver.faults.failNext('restore');
    const err = (await failure(node.create())) as DomainError;
    expect(err.kind).toBe('runtime_failure');
  });
});

describe('orchestrator: admission', () => {
  it('refuses creates beyond max sandboxes with 429 and Retry-After, counting starts in flight', async () => {
    const node = new FakeNode({ maxSandboxes: 2 });
    await node.create();
    const held = node.driver.faults.hold('restore');
    const second = node.create();
    await held.reached;
    const refused = errorBody(await failure(node.create()));
    expect(refused).toMatchObject({ status: 429, retryAfter: 5 });
    expect(refused.body.message).toMatch(/maximum of 2 sandboxes/);
    held.release();
    await second;
    // A sandbox that goes frees its place.
    await node.orchestrator.kill(node.orchestrator.list()[0]!.sandboxId);
    await node.create();
  });

  it('refuses starts beyond the queue as capacity: 429 and Retry-After', async () => {
    const node = new FakeNode({ maxConcurrentStarts: 1 });
    const held = [0, 1, 2, 3].map(() => node.driver.faults.hold('restore'));
    const queued = held.map(() => node.create());
    await Promise.all(held.map((h) => h.reached));
    expect(errorBody(await failure(node.create()))).toMatchObject({ status: 429, retryAfter: 1 });
    held.forEach((h) => h.release());
    await Promise.all(queued);
  });

  it('passes a network refusal (every address in use) on as 503 with Retry-After', async () => {
    const node = new FakeNode({ slotCapacity: 1 });
    await node.create();
    const err = await failure(node.create());
    expect(err).toBeInstanceOf(NetworkError);
    expect(errorBody(err)).toMatchObject({ status: 503, retryAfter: 5 });
  });

  it('takes extra measures and refuses while the node stops', async () => {
    const node = new FakeNode({
      admission: [
        {
          name: 'memory',
          refuse: (req) =>
            req.kind === 'create' && (req.resources?.memoryMB ?? 0) > 4096
              ? new DomainError('capacity', 'not enough memory', 7)
              : undefined,
        },
      ],
    });
    const big = {
      kind: 'image' as const,
      image: 'x',
      resources: { cpuCount: 1, memoryMB: 8192, diskSizeMB: 1024 },
    };
    expect(errorBody(await failure(node.create({ source: big })))).toMatchObject({
      status: 429,
      retryAfter: 7,
    });
    await node.orchestrator.shutdown();
    expect(errorBody(await failure(node.create()))).toMatchObject({ status: 503, retryAfter: 5 });
  });
});
