import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, DOMAIN, getViaHost, SNAPSHOT_STORE, useTestServer } from '@agentenv/test-support/server';
import { PosixRepository } from '@agentenv/snapshot';

useTestServer();
const repo = new PosixRepository({ path: SNAPSHOT_STORE, create: false });
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
  await repo.open();
});
afterAll(() => repo.close());

/** The sandbox's newest pause in the repository: its stored bytes and the kind it recorded. */
/** The sandbox's newest stored pause, once it is of `kind` (a pause answers before its upload). */
function newestPause(sandboxId: string, kind: 'memory' | 'filesystem') {
  return eventually(
    async () => {
      const r = (await repo.listRecords({ labels: { sandboxId, kind: 'pause' } }, { limit: 1 })).records[0];
      expect(r).toBeDefined();
      // The record's public part; its secrets are sealed beside it.
      const sandbox = (r!.meta as { pausedSandbox: { pauseKind?: string } }).pausedSandbox;
      expect(sandbox.pauseKind ?? 'memory').toBe(kind);
      return { bytes: r!.bytesTotal, kind };
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
}

/**
 * A mark held in memory only (a tmpfs, never captured): a memory restore keeps it, a fresh start
 * does not. (The boot id cannot tell them apart: a restore brings back the template's.)
 */
const MARK = '/dev/shm/aenv-test-mark';
const setMark = (s: Sandbox) => s.commands.run(`echo in-memory > ${MARK}`);
const mark = async (s: Sandbox) =>
  (await s.commands.run(`cat ${MARK} 2>/dev/null || echo none`)).stdout.trim();
const state = async (id: string) => (await api('GET', `/sandboxes/${id}`)).json.state;

describe('lifecycle and filesystem-only pause with the E2B SDK', () => {
  it('refuses impossible lifecycle combinations with 400', async () => {
    for (const [body, message] of [
      [
        { autoPause: false, autoPauseMemory: false },
        'autoPauseMemory=false only applies when autoPause is true.',
      ],
      [{ autoPauseMemory: false, autoResume: { enabled: true } }, 'cannot be combined with autoResume'],
      [{ autoPause: false, autoResume: { enabled: true } }, 'autoResume can only be true'],
    ] as const) {
      const r = await api('POST', '/v2/sandboxes', { templateID: 'base', ...body });
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ code: 400, message: expect.stringContaining(message) });
    }
    expect((await api('GET', '/v2/sandboxes')).json).toHaveLength(0);
  });

  it('pause({ keepMemory: false }) keeps files only: a cold boot, same id, token, env and user; far smaller', async () => {
    const sbx = await Sandbox.create({ envs: { FOO: 'bar' }, timeoutMs: 300_000 });
    const id = sbx.sandboxId;
    try {
      await sbx.files.write('/home/user/keep/notes.txt', 'kept across a cold boot');
      await sbx.commands.run('rm /etc/issue && echo changed > /etc/motd', { user: 'root' });
      // A process holding memory, which a memory pause must store and a filesystem pause must not.
      await sbx.commands.run(
        'python3 -c "import time; b=bytearray(64<<20); b[::4096]=b\\"x\\"*(len(b)//4096); time.sleep(3600)"',
        {
          background: true,
          timeoutMs: 0,
        },
      );
      const token = (await api('GET', `/sandboxes/${id}`)).json.envdAccessToken;
      expect(token).toEqual(expect.any(String));
      await setMark(sbx);

      await sbx.pause();
      const memory = await newestPause(id, 'memory');
      const again = await Sandbox.connect(id);
      expect(await mark(again)).toBe('in-memory');

      await again.pause({ keepMemory: false });
      expect(await state(id)).toBe('paused');
      const fsOnly = await newestPause(id, 'filesystem');
      expect(fsOnly.bytes).toBeLessThanOrEqual(memory.bytes / 10);
      console.log(`pause bytes: memory ${memory.bytes}, filesystem only ${fsOnly.bytes}`);

      const cold = await Sandbox.connect(id);
      expect(cold.sandboxId).toBe(id);
      expect(await mark(cold)).toBe('none');
      expect(await cold.files.read('/home/user/keep/notes.txt')).toBe('kept across a cold boot');
      expect(await cold.files.exists('/etc/issue')).toBe(false);
      expect((await cold.files.read('/etc/motd')).trim()).toBe('changed');
      expect((await cold.commands.run('echo $FOO')).stdout.trim()).toBe('bar');
      expect((await cold.commands.run('whoami')).stdout.trim()).toBe('user');
      expect((await cold.commands.run('pgrep -f bytearra[y] || true')).stdout.trim()).toBe('');
      expect((await api('GET', `/sandboxes/${id}`)).json).toMatchObject({
        state: 'running',
        envdAccessToken: token,
      });
    } finally {
      await sbx.kill();
    }
  });

  it("connect({ onResume: 'reboot' }) boots a memory pause afresh: its files and identity, not its processes", async () => {
    const sbx = await Sandbox.create({ envs: { FOO: 'bar' }, timeoutMs: 300_000 });
    const id = sbx.sandboxId;
    try {
      await sbx.files.write('/home/user/keep/notes.txt', 'kept across a reboot');
      await sbx.commands.run('rm /etc/issue', { user: 'root' });
      await sbx.commands.run('sleep 3600', { background: true, timeoutMs: 0 });
      const token = (await api('GET', `/sandboxes/${id}`)).json.envdAccessToken;
      await setMark(sbx);
      await sbx.pause();
      const memory = await newestPause(id, 'memory');

      const cold = await Sandbox.connect(id, { onResume: 'reboot' });
      expect(await mark(cold)).toBe('none');
      expect(await cold.files.read('/home/user/keep/notes.txt')).toBe('kept across a reboot');
      expect(await cold.files.exists('/etc/issue')).toBe(false);
      expect((await cold.commands.run('echo $FOO')).stdout.trim()).toBe('bar');
      expect((await cold.commands.run('whoami')).stdout.trim()).toBe('user');
      expect((await cold.commands.run('pgrep -x sleep || true')).stdout.trim()).toBe('');
      expect((await api('GET', `/sandboxes/${id}`)).json).toMatchObject({
        state: 'running',
        envdAccessToken: token,
      });
      // The memory pause it booted from is still the newest stored pause, unchanged.
      expect(await newestPause(id, 'memory')).toEqual(memory);
      // On a running sandbox it is a no-op.
      await setMark(cold);
      const same = await Sandbox.connect(id, { onResume: 'reboot' });
      expect(await mark(same)).toBe('in-memory');
    } finally {
      await sbx.kill();
    }
  });

  it('onTimeout { action: pause, keepMemory: false } pauses filesystem-only at the end time', async () => {
    const sbx = await Sandbox.create({
      timeoutMs: 300_000,
      lifecycle: { onTimeout: { action: 'pause', keepMemory: false } },
    });
    const id = sbx.sandboxId;
    try {
      await sbx.files.write('/home/user/ttl.txt', 'written before the timeout');
      await setMark(sbx);
      // The end time moves close once the sandbox is set up, so the TTL pause races nothing.
      await sbx.setTimeout(1_000);
      // The listed state says paused while the pause is under way: wait for the stored pause.
      await newestPause(id, 'filesystem');
      expect((await api('GET', `/sandboxes/${id}`)).json.lifecycle).toEqual({
        onTimeout: 'pause',
        autoResume: false,
      });
      const cold = await Sandbox.connect(id, { timeoutMs: 300_000 });
      expect(await mark(cold)).toBe('none');
      expect(await cold.files.read('/home/user/ttl.txt')).toBe('written before the timeout');
    } finally {
      await sbx.kill();
    }
  });

  it('autoResume: a request through the proxy wakes a paused sandbox and is answered', async () => {
    const sbx = await Sandbox.create({ lifecycle: { onTimeout: 'pause', autoResume: true } });
    const id = sbx.sandboxId;
    try {
      await sbx.files.write('/home/user/www/index.html', 'served after a resume');
      const server = await sbx.commands.run('cd /home/user/www && python3 -m http.server 8080', {
        background: true,
        timeoutMs: 0,
      });
      const host = sbx.getHost(8080);
      expect(host).toBe(`8080-${id}.${DOMAIN}`);
      await eventually(async () => expect((await getViaHost(host, '/index.html')).status).toBe(200));
      // The command's output stream is traffic too: closed, so that only the request below wakes it.
      await server.disconnect();
      await sbx.pause();
      expect(await state(id)).toBe('paused');
      // The first request waits for the resume and is forwarded.
      expect(await getViaHost(host, '/index.html')).toEqual({ status: 200, body: 'served after a resume' });
      expect(await state(id)).toBe('running');

      // A filesystem-only pause of the same sandbox is not woken by traffic.
      await sbx.pause({ keepMemory: false });
      expect((await getViaHost(host, '/index.html')).status).toBe(502);
      expect(await state(id)).toBe('paused');
    } finally {
      await sbx.kill();
    }
  });
});
