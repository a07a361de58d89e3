import { CommandExitError, Sandbox, Secret, Template } from 'e2b';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, useTestServer } from '@agentenv/test-support/server';

useTestServer();
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
});

const state = async (id: string) => {
  const r = await api('GET', `/sandboxes/${id}`);
  return r.status === 404 ? 'gone' : r.json?.state;
};

describe('setTimeout(0): the timeout action, now', () => {
  it('kills a sandbox without auto-pause and pauses one with it', async () => {
    const killed = await Sandbox.create({ lifecycle: { onTimeout: 'kill' } });
    const paused = await Sandbox.create({ lifecycle: { onTimeout: 'pause' } });
    try {
      await killed.setTimeout(0);
      await paused.setTimeout(0);
      await eventually(
        async () => {
          expect(await state(killed.sandboxId)).toBe('gone');
          expect(await state(paused.sandboxId)).toBe('paused');
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    } finally {
      await killed.kill().catch(() => undefined);
      await paused.kill();
    }
  });

  it('connect takes a timeout of 0 (a running sandbox keeps its end); create and resume refuse it', async () => {
    const sbx = await Sandbox.create({ timeoutMs: 120_000 });
    try {
      const before = (await sbx.getInfo()).endAt.getTime();
      const c = await api('POST', `/sandboxes/${sbx.sandboxId}/connect`, { timeout: 0 });
      expect(c.status).toBe(200);
      expect((await sbx.getInfo()).endAt.getTime()).toBe(before);
      expect(await state(sbx.sandboxId)).toBe('running');

      const created = await api('POST', '/sandboxes', { templateID: 'base', timeout: 0 });
      expect(created.status).toBe(400);
      const resumed = await api('POST', `/sandboxes/${sbx.sandboxId}/resume`, { timeout: 0 });
      expect(resumed.status).toBe(400);
      expect(resumed.json?.message).toBe('Timeout must be greater than 0');
    } finally {
      await sbx.kill();
    }
  });
});

describe('GET /templates/aliases/{alias}', () => {
  it('knows base and snapshots by name, 404 otherwise, and wants the API key', async () => {
    expect(await Template.exists('base')).toBe(true);
    expect(await Template.exists('no-such-template-xyz')).toBe(false);
    expect((await api('GET', '/templates/aliases/base')).json).toEqual({ templateID: 'base', public: true });
    const missing = await api('GET', '/templates/aliases/no-such-template-xyz');
    expect(missing.status).toBe(404);

    const sbx = await Sandbox.create();
    const name = `parity-alias-${Date.now()}`;
    try {
      const snap = await api('POST', `/sandboxes/${sbx.sandboxId}/snapshots`, { name });
      expect(snap.status).toBe(201);
      expect(await Template.exists(name)).toBe(true);
      expect((await api('GET', `/templates/aliases/${name}`)).json).toEqual({
        templateID: snap.json?.snapshotID,
        public: false,
      });
    } finally {
      await sbx.kill();
      await api('DELETE', `/templates/${name}`);
    }

    const anonymous = await fetch(new URL('/templates/aliases/base', process.env.E2B_API_URL));
    expect(anonymous.status).toBe(401);
  });
});

describe('/proc/sys/kernel/random/boot_id', () => {
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
  const bootId = async (s: Sandbox) =>
    (await s.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim();

  it('is new for a create, a fork child and a filesystem-only resume; a memory resume keeps it', async () => {
    const a = await Sandbox.create({ timeoutMs: 120_000 });
    const b = await Sandbox.create();
    try {
      const first = await bootId(a);
      expect(first).toMatch(UUID);
      expect(await bootId(b)).not.toBe(first);
      const write = await a.commands
        .run('echo 0 > /proc/sys/kernel/random/boot_id', { user: 'root' })
        .catch((e: unknown) => e);
      expect(write).toBeInstanceOf(CommandExitError);

      const [child] = await a.fork({ count: 1 } as never);
      expect(child).toBeInstanceOf(Sandbox);
      const childId = await bootId(child as Sandbox);
      await (child as Sandbox).kill();
      expect(childId).toMatch(UUID);
      expect(childId).not.toBe(first);

      await a.pause();
      expect(await bootId(await Sandbox.connect(a.sandboxId))).toBe(first);
      await a.pause({ keepMemory: false });
      const cold = await bootId(await Sandbox.connect(a.sandboxId));
      expect(cold).toMatch(UUID);
      expect(cold).not.toBe(first);
    } finally {
      await a.kill();
      await b.kill();
    }
  });
});

describe('what AgentENV does not have fails clearly through the SDK (docs/compatibility.md)', () => {
  it('Secret.* and the create options of features it lacks', async () => {
    await expect(Secret.exists('openai-key')).rejects.toThrow(
      /^501: secrets .* is not supported by AgentENV/,
    );
    await expect(
      Sandbox.create({
        iam: { tokens: { aws: Secret.iamToken({ audience: 'sts', tokenType: 'JWT-SVID' }) } },
      }),
    ).rejects.toThrow(/^501: iam is not supported by AgentENV/);
    await expect(Sandbox.create({ network: { httpsPorts: [3000] } })).rejects.toThrow(
      /^501: network.httpsPorts is not supported by AgentENV/,
    );
  });
});
