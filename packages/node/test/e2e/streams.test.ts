import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { useTestServer } from '@agentenv/test-support/server';

// Idle freezing after 1 s without use: longer silences than that are what the commands below
// have. No warm pool, so the one sandbox of the file is the only one on the node.
useTestServer({ AENV_IDLE_FREEZE_SECS: '1', AENV_POOL_SIZE: '0' });

/** `seq 1 n` as the command prints it. */
const seq = (n: number, from = 1) => Array.from({ length: n - from + 1 }, (_, i) => `${i + from}\n`).join('');

let sbx: Sandbox;
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  sbx = await Sandbox.create({ timeoutMs: 600_000 });
}, 300_000);
afterAll(async () => {
  await sbx?.kill();
});

describe('command streams through the node proxy end with their process, whole', () => {
  it('a silent command longer than the idle freeze, and one silent between its lines', async () => {
    const [silent, gaps] = await Promise.all([
      sbx.commands.run('sleep 4; echo done', { timeoutMs: 60_000 }),
      sbx.commands
        .run('for i in 1 2 3; do echo $i; sleep 1.5; done; echo end >&2; exit 3', {
          timeoutMs: 60_000,
        })
        .catch((err: unknown) => err as { exitCode: number; stdout: string; stderr: string }),
    ]);
    expect(silent).toMatchObject({ exitCode: 0, stdout: 'done\n', stderr: '' });
    expect(gaps).toMatchObject({ exitCode: 3, stdout: '1\n2\n3\n', stderr: 'end\n' });
  }, 60_000);

  it('a chatty command: megabytes on stdout and stderr as fast as they come', async () => {
    const r = await sbx.commands.run('seq 1 400000; seq 1 100000 >&2', { timeoutMs: 120_000 });
    expect(r.exitCode).toBe(0);
    expect(r.stdout.length).toBe(seq(400_000).length);
    expect(r.stdout).toBe(seq(400_000));
    expect(r.stderr).toBe(seq(100_000));
  }, 120_000);

  it('many commands at once, each with its own output and exit', async () => {
    const runs = await Promise.all(
      Array.from({ length: 24 }, (_, n) =>
        sbx.commands
          .run(`seq 1 ${2000 + n}; sleep ${1 + (n % 3)}; echo end-${n}; exit ${n % 2}`, { timeoutMs: 60_000 })
          .catch((err: unknown) => err as { exitCode: number; stdout: string }),
      ),
    );
    runs.forEach((r, n) => {
      expect(r.exitCode).toBe(n % 2);
      expect(r.stdout).toBe(`${seq(2000 + n)}end-${n}\n`);
    });
  }, 120_000);

  it('a command fed on stdin that is silent longer than the idle freeze before each answer', async () => {
    const echo = await sbx.commands.run(
      `while IFS= read -r l; do sleep 1.5; printf '%s\\n' "$l"; done; echo eof`,
      { background: true, stdin: true, timeoutMs: 60_000 },
    );
    let sent = '';
    for (let i = 0; i < 3; i++) {
      const line = `line ${i} ${'x'.repeat(10_000)}\n`;
      await echo.sendStdin(line);
      sent += line;
      await eventually(() => expect(echo.stdout).toBe(sent), { timeoutMs: 10_000 });
    }
    await echo.closeStdin();
    expect(await echo.wait()).toMatchObject({ exitCode: 0, stdout: `${sent}eof\n` });
  }, 60_000);

  it('a stream its sandbox is paused under ends with the SDK’s error saying so, not a broken body', async () => {
    const sleeper = await sbx.commands.run('echo up; sleep 600', { background: true, timeoutMs: 0 });
    await eventually(() => expect(sleeper.stdout).toBe('up\n'));
    await sbx.pause();
    await expect(sleeper.wait()).rejects.toThrow(`sandbox ${sbx.sandboxId} was paused`);
    sbx = await Sandbox.connect(sbx.sandboxId);
    expect((await sbx.commands.run('echo back')).stdout).toBe('back\n');
  }, 60_000);
});
