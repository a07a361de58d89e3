import { CommandExitError, FilesystemEventType, Sandbox } from 'e2b';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, DOMAIN, getViaHost, PORT, useTestServer } from '@agentenv/test-support/server';

useTestServer();
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
});

describe('the E2B SDK against aenv-server', () => {
  it('creates a base sandbox and uses commands, files and a pty in it', async () => {
    const sbx = await Sandbox.create({ metadata: { suite: 'sdk' } });
    try {
      const who = await sbx.commands.run(
        'whoami; echo $E2B_SANDBOX_ID; sudo -n id -un; echo hi | sudo tee /root/t >/dev/null && sudo cat /root/t',
      );
      expect(who.stdout).toBe(`user\n${sbx.sandboxId}\nroot\nhi\n`);
      const tools = await sbx.commands.run(
        'python --version && python3 -c "print(6*7)" && git --version && curl --version >/dev/null && node -e "console.log(1)"',
      );
      expect(tools.stdout).toMatch(/Python 3[\s\S]*42\ngit version [\s\S]*1\n$/);
      await expect(sbx.commands.run('exit 4')).rejects.toBeInstanceOf(CommandExitError);

      await sbx.files.write('notes/a.txt', 'alpha');
      expect(await sbx.files.read('/home/user/notes/a.txt')).toBe('alpha');
      expect((await sbx.files.list('notes')).map((e) => e.name)).toEqual(['a.txt']);
      expect((await sbx.files.getInfo('notes/a.txt')).owner).toBe('user');

      // gVisor's inotify gives envd the kernel's own events: an upload is CREATE, CHMOD (its
      // owner), WRITE, as in E2B; a directory made during a recursive watch is watched at once.
      const seen: string[] = [];
      const watch = await sbx.files.watchDir('notes', (e) => void seen.push(`${e.type} ${e.name}`), {
        recursive: true,
      });
      await sbx.files.write('notes/b.txt', 'beta');
      await sbx.files.makeDir('notes/sub');
      await sbx.files.write('notes/sub/c.txt', 'gamma');
      const { CREATE, CHMOD, WRITE } = FilesystemEventType;
      await eventually(() => expect(seen).toContain(`${WRITE} sub/c.txt`), { intervalMs: 50 });
      await watch.stop();
      expect(seen).toEqual([
        `${CREATE} b.txt`,
        `${CHMOD} b.txt`,
        `${WRITE} b.txt`,
        `${CREATE} sub`,
        `${CHMOD} sub`,
        `${CREATE} sub/c.txt`,
        `${CHMOD} sub/c.txt`,
        `${WRITE} sub/c.txt`,
      ]);

      let screen = '';
      const term = await sbx.pty.create({
        cols: 100,
        rows: 30,
        onData: (d) => void (screen += new TextDecoder().decode(d)),
      });
      await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo "cols=$(tput cols)"\n'));
      await eventually(() => expect(screen).toMatch(/cols=100/), { intervalMs: 50 });
      await sbx.pty.kill(term.pid);
    } finally {
      await sbx.kill();
    }
  });

  it('lists with metadata filters and pagination, and reports info', async () => {
    const tag = `t${Date.now()}`;
    const made = await Promise.all([1, 2, 3].map((i) => Sandbox.create({ metadata: { tag, i: String(i) } })));
    try {
      const info = await made[0]!.getInfo();
      expect(info).toMatchObject({
        sandboxId: made[0]!.sandboxId,
        templateId: 'base',
        state: 'running',
        metadata: { tag, i: '1' },
      });
      expect(info.endAt.getTime()).toBeGreaterThan(Date.now());

      const one = await Sandbox.list({ query: { metadata: { tag, i: '2' } } }).nextItems();
      expect(one.map((s) => s.sandboxId)).toEqual([made[1]!.sandboxId]);

      const pager = Sandbox.list({ query: { metadata: { tag } }, limit: 2 });
      const first = await pager.nextItems();
      expect(first).toHaveLength(2);
      expect(pager.hasNext).toBe(true);
      const second = await pager.nextItems();
      expect(second).toHaveLength(1);
      expect(pager.hasNext).toBe(false);
      expect(new Set([...first, ...second].map((s) => s.sandboxId))).toEqual(
        new Set(made.map((s) => s.sandboxId)),
      );

      await made[2]!.setTimeout(3_600_000);
      expect((await made[2]!.getInfo()).endAt.getTime()).toBeGreaterThan(Date.now() + 3_000_000);
    } finally {
      await Promise.all(made.map((s) => s.kill()));
    }
  });

  it('pauses and resumes with memory and files intact', async () => {
    const sbx = await Sandbox.create();
    try {
      await sbx.files.write('/home/user/state.txt', 'kept');
      // Written aside and renamed, so that a read never lands between the truncation and the write.
      const counter =
        'n=0; while true; do n=$((n+1)); echo $n > /tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.1; done';
      await sbx.commands.run(counter, {
        background: true,
        timeoutMs: 0,
      });
      const counted = async () => Number((await sbx.commands.run('cat /tmp/n 2>/dev/null || echo 0')).stdout);
      const before = await eventually(async () => {
        const n = await counted();
        expect(n).toBeGreaterThan(1);
        return n;
      });
      expect(await sbx.pause()).toBe(true);
      expect(await sbx.isRunning()).toBe(false);
      const listed = await Sandbox.list({ query: { state: ['paused'] } }).nextItems();
      expect(listed.map((s) => s.sandboxId)).toContain(sbx.sandboxId);
      expect((await api('POST', `/sandboxes/${sbx.sandboxId}/pause`)).status).toBe(409);

      const again = await Sandbox.connect(sbx.sandboxId);
      expect(await again.isRunning()).toBe(true);
      expect(await again.files.read('state.txt')).toBe('kept');
      const at = Number((await again.commands.run('cat /tmp/n')).stdout);
      expect(at).toBeGreaterThanOrEqual(before);
      // The counter kept running across the pause.
      await eventually(async () =>
        expect(Number((await again.commands.run('cat /tmp/n')).stdout)).toBeGreaterThan(at),
      );
    } finally {
      await sbx.kill();
    }
    expect(await sbx.isRunning()).toBe(false);
    expect(await Sandbox.kill(sbx.sandboxId)).toBe(false);
  });

  it('returns metrics samples', async () => {
    const sbx = await Sandbox.create();
    try {
      const m = await sbx.getMetrics();
      expect(m.length).toBeGreaterThan(0);
      expect(m[0]).toMatchObject({
        cpuCount: expect.any(Number),
        memTotal: expect.any(Number),
        memUsed: expect.any(Number),
      });
    } finally {
      await sbx.kill();
    }
  });

  it('makes a secure sandbox reject a wrong envd token', async () => {
    const sbx = await Sandbox.create({ secure: true });
    try {
      expect((await sbx.commands.run('echo ok')).stdout).toBe('ok\n');
      const info = await api('GET', `/sandboxes/${sbx.sandboxId}`);
      expect(info.json.envdAccessToken).toMatch(/^[0-9a-f]{64}$/);
      const wrong = await fetch(`http://127.0.0.1:${PORT}/process.Process/List`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'e2b-sandbox-id': sbx.sandboxId,
          'e2b-sandbox-port': '49983',
          'x-access-token': 'nope',
        },
        body: '{}',
      });
      expect(wrong.status).toBe(401);
      const none = await fetch(`http://127.0.0.1:${PORT}/envs`, {
        headers: { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '49983' },
      });
      expect(none.status).toBe(401);
    } finally {
      await sbx.kill();
    }
  });

  it('reaches an HTTP server in the sandbox through getHost and the proxy', async () => {
    const sbx = await Sandbox.create();
    try {
      await sbx.files.write('/home/user/www/index.html', 'hello from the sandbox');
      await sbx.commands.run('cd /home/user/www && python3 -m http.server 8080', {
        background: true,
        timeoutMs: 0,
      });
      const host = sbx.getHost(8080);
      expect(host).toBe(`8080-${sbx.sandboxId}.${DOMAIN}`);
      await eventually(async () =>
        expect(await getViaHost(host, '/index.html')).toEqual({
          status: 200,
          body: 'hello from the sandbox',
        }),
      );
      const viaHeaders = await fetch(`http://127.0.0.1:${PORT}/index.html`, {
        headers: { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '8080' },
      });
      expect(await viaHeaders.text()).toBe('hello from the sandbox');
      const native = await fetch(`http://127.0.0.1:${PORT}/proxy/${sbx.sandboxId}/8080/index.html`);
      expect(await native.text()).toBe('hello from the sandbox');
      const unknown = await getViaHost(`8080-nosuchsandbox0000000.${DOMAIN}`);
      expect(unknown.status).toBe(502);
      expect(JSON.parse(unknown.body)).toMatchObject({ code: 502, message: 'The sandbox was not found' });
    } finally {
      await sbx.kill();
    }
  });
});

describe('TTL', () => {
  it('pauses a sandbox whose timeout passed, or kills it with autoPause off', async () => {
    // Nothing runs in them after the create: a timeout of two seconds is all the test waits for.
    const [paused, killed] = await Promise.all([
      Sandbox.create({ timeoutMs: 2_000 }),
      Sandbox.create({ timeoutMs: 2_000, lifecycle: { onTimeout: 'kill' } }),
    ]);
    try {
      await eventually(
        async () => {
          expect((await api('GET', `/sandboxes/${paused.sandboxId}`)).json?.state).toBe('paused');
          expect((await api('GET', `/sandboxes/${killed.sandboxId}`)).status).toBe(404);
        },
        { timeoutMs: 20_000, intervalMs: 500 },
      );
    } finally {
      await paused.kill();
      await killed.kill().catch(() => undefined);
    }
  });
});
