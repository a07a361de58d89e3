import { CommandExitError, Sandbox, TimeoutError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { type EnvdProcess, initEnvd, startEnvdProcess } from '@agentenv/test-support/envd';

let envd: EnvdProcess;
let sbx: Sandbox;

beforeAll(async () => {
  envd = await startEnvdProcess();
  const r = await initEnvd({ envVars: { E2B_SANDBOX: 'true', SANDBOX_WIDE: 'everywhere' } });
  expect(r.status).toBe(204);
  sbx = await Sandbox.create();
});

afterAll(async () => {
  await envd?.stop();
});

describe('commands through the E2B SDK', () => {
  it('runs a command in the foreground', async () => {
    const r = await sbx.commands.run('echo hello; echo oops >&2');
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe('hello\n');
    expect(r.stderr).toBe('oops\n');
  });

  it('reports a non-zero exit as CommandExitError', async () => {
    const err = await sbx.commands.run('echo bad >&2; exit 3').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandExitError);
    expect((err as CommandExitError).exitCode).toBe(3);
    expect((err as CommandExitError).stderr).toBe('bad\n');
  });

  it('keeps request env vars to their command and applies sandbox-wide ones', async () => {
    const a = await sbx.commands.run('echo "$FOO|$SANDBOX_WIDE|$E2B_SANDBOX"', { envs: { FOO: 'bar' } });
    expect(a.stdout).toBe('bar|everywhere|true\n');
    const b = await sbx.commands.run('echo "${FOO-unset}"');
    expect(b.stdout).toBe('unset\n');
  });

  it('runs in the requested cwd, and in the home directory by default', async () => {
    expect((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout).toBe('/tmp\n');
    expect((await sbx.commands.run('pwd', { user: 'user' })).stdout).toBe('/home/user\n');
    expect((await sbx.commands.run('pwd', { user: 'user', cwd: 'sub/..' })).stdout).toBe('/home/user\n');
    await expect(sbx.commands.run('pwd', { cwd: '/no/such/dir' })).rejects.toThrow(/does not exist/);
  });

  it('runs as the requested user with their identity', async () => {
    const u = await sbx.commands.run('echo "$(id -u):$(id -g):$(whoami):$HOME:$USER"', { user: 'user' });
    const ids = (await sbx.commands.run('echo "$(id -u user):$(id -g user)"')).stdout.trim();
    expect(u.stdout).toBe(`${ids}:user:/home/user:user\n`);
    const r = await sbx.commands.run('whoami', { user: 'root' });
    expect(r.stdout).toBe('root\n');
    await expect(sbx.commands.run('true', { user: 'nobody-such-user' })).rejects.toThrow(/invalid username/);
  });

  it('feeds stdin on demand and closes it', async () => {
    const h = await sbx.commands.run('cat; echo "[eof]"', { background: true, stdin: true });
    await sbx.commands.sendStdin(h.pid, 'abc\n');
    await h.sendStdin('def\n');
    await sbx.commands.closeStdin(h.pid);
    const r = await h.wait();
    expect(r.stdout).toBe('abc\ndef\n[eof]\n');
  });

  it('closes stdin when not requested, so readers see EOF', async () => {
    const r = await sbx.commands.run('cat; echo done', { timeoutMs: 5000 });
    expect(r.stdout).toBe('done\n');
  });

  it('lists, connects to and kills a background command', async () => {
    const h = await sbx.commands.run('for i in $(seq 1 200); do echo tick $i; sleep 0.05; done', {
      background: true,
      envs: { MARK: 'listed' },
    });
    const listed = (await sbx.commands.list()).find((p) => p.pid === h.pid);
    expect(listed).toMatchObject({ cmd: '/bin/bash', envs: { MARK: 'listed' } });
    expect(listed?.args).toContain('-c');

    const seen: string[] = [];
    const second = await sbx.commands.connect(h.pid, { onStdout: (d) => void seen.push(d) });
    await eventually(() => expect(seen.join('')).toMatch(/tick \d+/), { intervalMs: 50 });

    expect(await sbx.commands.kill(h.pid)).toBe(true);
    const r = await second.wait().catch((e: unknown) => e);
    expect(r).toBeInstanceOf(CommandExitError);
    expect((r as CommandExitError).error).toMatch(/signal/);
    await h.wait().catch(() => undefined);
    expect((await sbx.commands.list()).some((p) => p.pid === h.pid)).toBe(false);
    expect(await sbx.commands.kill(h.pid)).toBe(false);
  });

  it('kills the process when the request deadline passes', async () => {
    const before = Date.now();
    const err = await sbx.commands.run('sleep 30; echo late', { timeoutMs: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(Date.now() - before).toBeLessThan(10_000);
    await eventually(async () => {
      const left = (await sbx.commands.list()).filter((p) => p.args.join(' ').includes('sleep 30'));
      expect(left).toEqual([]);
    });
  });

  it('keeps running when the client disconnects', async () => {
    const h = await sbx.commands.run('sleep 1; echo survived > /tmp/aenv-envd-disconnect', {
      background: true,
    });
    await h.disconnect();
    expect((await sbx.commands.list()).some((p) => p.pid === h.pid)).toBe(true);
    await eventually(async () =>
      expect((await sbx.commands.run('cat /tmp/aenv-envd-disconnect 2>/dev/null || true')).stdout).toBe(
        'survived\n',
      ),
    );
    await sbx.commands.run('rm /tmp/aenv-envd-disconnect');
  });

  it('streams output through callbacks as it comes', async () => {
    const chunks: string[] = [];
    await sbx.commands.run('echo one; sleep 0.2; echo two', { onStdout: (d) => void chunks.push(d) });
    expect(chunks.join('')).toBe('one\ntwo\n');
    expect(chunks.length).toBeGreaterThanOrEqual(2);
  });

  it('delivers large output completely', async () => {
    const r = await sbx.commands.run('head -c 20000000 /dev/zero | tr "\\0" a');
    expect(r.stdout.length).toBe(20_000_000);
  });

  it('runs 50 commands concurrently', async () => {
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => sbx.commands.run(`echo ${i}`)));
    expect(results.map((r) => r.stdout)).toEqual(Array.from({ length: 50 }, (_, i) => `${i}\n`));
  });
});

describe('pty through the E2B SDK', () => {
  it('creates a terminal, types into it, resizes it and kills it', async () => {
    let screen = '';
    const decoder = new TextDecoder();
    const term = await sbx.pty.create({
      cols: 80,
      rows: 24,
      user: 'user',
      onData: (d) => void (screen += decoder.decode(d)),
    });
    const waitFor = (re: RegExp) => eventually(() => expect(screen).toMatch(re), { intervalMs: 50 });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo "cols=$(tput cols) me=$(whoami)"\n'));
    await waitFor(/cols=80 me=user/);
    await sbx.pty.resize(term.pid, { cols: 132, rows: 40 });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo "cols=$(tput cols)"\n'));
    await waitFor(/cols=132/);
    expect(await sbx.pty.kill(term.pid)).toBe(true);
    await term.wait().catch(() => undefined);
    expect((await sbx.commands.list()).some((p) => p.pid === term.pid)).toBe(false);
  });

  it('ends when the shell exits', async () => {
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: () => undefined });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('exit 0\n'));
    const r = await term.wait();
    expect(r.exitCode).toBe(0);
  });
});
