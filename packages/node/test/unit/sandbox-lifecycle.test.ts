import { describe, expect, it } from 'vitest';
import { useFakeApp } from '@agentenv/test-support/fakes';
import { parseLifecycle } from '../../src/api/lifecycle.js';
import { expiryAction } from '../../src/orchestrator/expiry.js';
import type { SandboxRecord } from '../../src/orchestrator/index.js';

const FS_AUTORESUME =
  'autoPauseMemory=false (filesystem-only auto-pause) cannot be combined with autoResume: ' +
  'a filesystem-only snapshot cannot be auto-resumed by traffic and must be resumed explicitly.';

describe('create-body lifecycle (E2B autoPause, autoPauseMemory, autoResume)', () => {
  it('pauses with memory when nothing is given, as the SDK sends no lifecycle', () => {
    expect(parseLifecycle({})).toEqual({ autoPause: true, autoPauseMemory: true, autoResume: false });
  });

  it('takes what the SDK sends for each onTimeout form', () => {
    // onTimeout: 'kill'
    expect(parseLifecycle({ autoPause: false })).toEqual({
      autoPause: false,
      autoPauseMemory: true,
      autoResume: false,
    });
    // onTimeout: { action: 'pause', keepMemory: false }
    expect(parseLifecycle({ autoPause: true, autoPauseMemory: false })).toEqual({
      autoPause: true,
      autoPauseMemory: false,
      autoResume: false,
    });
    // onTimeout: 'pause', autoResume: true; and autoResume alone (absent autoPause pauses here)
    for (const body of [
      { autoPause: true, autoResume: { enabled: true } },
      { autoResume: { enabled: true } },
    ])
      expect(parseLifecycle(body)).toEqual({ autoPause: true, autoPauseMemory: true, autoResume: true });
  });

  it('refuses the combinations that cannot happen, with E2B’s messages', () => {
    expect(() => parseLifecycle({ autoPause: false, autoPauseMemory: false })).toThrow(
      'autoPauseMemory=false only applies when autoPause is true.',
    );
    expect(() => parseLifecycle({ autoPauseMemory: false, autoResume: { enabled: true } })).toThrow(
      FS_AUTORESUME,
    );
    expect(() => parseLifecycle({ autoPause: false, autoResume: { enabled: true } })).toThrow(
      'autoResume can only be true when the sandbox pauses on timeout (autoPause: true)',
    );
  });

  it('expires a sandbox by killing, pausing, or pausing without memory', () => {
    const rec = (r: Partial<SandboxRecord>) => r as SandboxRecord;
    expect(expiryAction(rec({ autoPause: false }))).toBe('kill');
    expect(expiryAction(rec({ autoPause: true }))).toEqual({ pause: 'memory' });
    expect(expiryAction(rec({ autoPause: true, autoPauseMemory: false }))).toEqual({ pause: 'filesystem' });
  });
});

describe('lifecycle over the API', () => {
  const fake = useFakeApp({ maxSandboxes: 3 });
  const { call } = fake;

  it('answers 400 for impossible combinations and creates nothing', async () => {
    const bodies: [object, string][] = [
      [
        { autoPause: false, autoPauseMemory: false },
        'autoPauseMemory=false only applies when autoPause is true.',
      ],
      [{ autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }, FS_AUTORESUME],
      [{ autoPause: false, autoResume: { enabled: true } }, 'autoResume can only be true'],
    ];
    for (const [body, message] of bodies) {
      const r = await call('POST', '/v2/sandboxes', { templateID: 'base', ...body });
      expect(r.status).toBe(400);
      expect(r.json.code).toBe(400);
      expect(r.json.message).toContain(message);
    }
    expect(await call('POST', '/v2/sandboxes', { autoPauseMemory: 'no' })).toMatchObject({ status: 400 });
    expect(fake.node.orchestrator.list()).toHaveLength(0);
  });

  it('reads the lifecycle back and keeps autoPauseMemory in the record', async () => {
    const killed = (await call('POST', '/v2/sandboxes', { autoPause: false })).json.sandboxID as string;
    expect((await call('GET', `/sandboxes/${killed}`)).json.lifecycle).toEqual({
      onTimeout: 'kill',
      autoResume: false,
    });
    const fsOnly = (await call('POST', '/v2/sandboxes', { autoPause: true, autoPauseMemory: false })).json
      .sandboxID as string;
    expect((await call('GET', `/sandboxes/${fsOnly}`)).json.lifecycle).toEqual({
      onTimeout: 'pause',
      autoResume: false,
    });
    expect(fake.node.orchestrator.get(fsOnly).autoPauseMemory).toBe(false);
    const resumes = (await call('POST', '/v2/sandboxes', { autoResume: { enabled: true } })).json
      .sandboxID as string;
    expect((await call('GET', `/sandboxes/${resumes}`)).json.lifecycle).toEqual({
      onTimeout: 'pause',
      autoResume: true,
    });
    expect(fake.node.orchestrator.get(resumes).autoPauseMemory).toBeUndefined();
  });

  it('takes a pause with no body, {} and {memory: true} as a memory pause', async () => {
    for (const payload of [undefined, {}, { memory: true }]) {
      const id = (await call('POST', '/v2/sandboxes', {})).json.sandboxID as string;
      expect((await call('POST', `/sandboxes/${id}/pause`, payload)).status).toBe(204);
      const rec = fake.node.orchestrator.get(id);
      expect(rec.state).toBe('paused');
      expect(rec.pauseKind).toBeUndefined();
      expect((await call('POST', `/v2/sandboxes/${id}/connect`, { timeout: 60 })).status).toBe(201);
    }
    const id = (await call('POST', '/v2/sandboxes', {})).json.sandboxID as string;
    expect(await call('POST', `/sandboxes/${id}/pause`, { memory: 'no' })).toMatchObject({ status: 400 });
  });
});
