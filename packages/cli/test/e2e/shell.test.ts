import { execFileSync, spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, API_KEY, URL_BASE, useTestServer } from '@agentenv/test-support/server';
import { AENV_BIN, aenv } from './cli-fixture.js';

/** A private tmux server, so the test neither sees nor disturbs anybody else's sessions. */
const SOCKET = `aenv-cli-e2e-${process.pid}`;
const tmux = (...args: string[]) =>
  execFileSync('tmux', ['-L', SOCKET, '-f', '/dev/null', ...args], { encoding: 'utf8' });
const pane = (session: string) => tmux('capture-pane', '-p', '-J', '-t', session);

/** Waits until the pane's text matches, returning the match; fails with the pane's content. */
function waitFor(session: string, re: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
  return eventually(
    () => {
      const text = pane(session);
      const m = text.match(re);
      if (!m) throw new Error(`pane never matched ${re}:\n${text}`);
      return m;
    },
    { timeoutMs },
  );
}

/** Starts `aenv <args>` in a 120x40 tmux window; the pane then prints the exit code and stays. */
function runInTmux(session: string, args: string): void {
  const cmd =
    `env AENV_URL=${URL_BASE} AENV_API_KEY=${API_KEY} ${process.execPath} ${AENV_BIN} ${args}; ` +
    `echo "AENV-EXITED:$?"; sleep 600`;
  tmux('new-session', '-d', '-s', session, '-x', '120', '-y', '40', cmd);
}

const hasTmux = spawnSync('tmux', ['-V']).status === 0;
useTestServer();

afterAll(async () => {
  spawnSync('tmux', ['-L', SOCKET, 'kill-server']);
});

describe.skipIf(!hasTmux)('interactive shell in tmux', () => {
  it('connects: prompt, commands, resize, and exit with the shell code', async () => {
    const created = await api('POST', '/v2/sandboxes', { templateID: 'base', timeout: 300 });
    expect(created.status).toBe(201);
    const id = created.json.sandboxID as string;

    runInTmux('cn', `connect ${id}`);
    await waitFor('cn', /user@[^\n]*\$ $/m);
    tmux('send-keys', '-t', 'cn', 'echo $((6*7))', 'Enter');
    await waitFor('cn', /^42$/m);

    tmux('send-keys', '-t', 'cn', 'echo "cols=$(tput cols) rows=$(tput lines)"', 'Enter');
    await waitFor('cn', /^cols=120 rows=40$/m);
    tmux('resize-window', '-t', 'cn', '-x', '100', '-y', '30');
    // SIGWINCH travels to the remote PTY asynchronously; ask again until it has arrived.
    await eventually(
      () => {
        if (/^cols=100 rows=30$/m.test(pane('cn'))) return;
        tmux('send-keys', '-t', 'cn', 'clear; echo "cols=$(tput cols) rows=$(tput lines)"', 'Enter');
        throw new Error(`the pane never showed the new size:\n${pane('cn')}`);
      },
      { intervalMs: 300 },
    );

    tmux('send-keys', '-t', 'cn', 'exit 7', 'Enter');
    await waitFor('cn', /^AENV-EXITED:7$/m);
    expect(pane('cn')).toMatch(new RegExp(`Shell in ${id} exited with code 7`));
    // connect leaves the sandbox running.
    expect((await api('GET', `/sandboxes/${id}`)).json.state).toBe('running');
  });

  it('sends Ctrl-C to the remote program and leaves on Ctrl-D; start kills its sandbox', async () => {
    runInTmux('st', 'start base --metadata shell=start');
    await waitFor('st', /user@[^\n]*\$ $/m, 30_000);
    const listed = (await api('GET', '/v2/sandboxes?metadata=' + encodeURIComponent('shell=start')))
      .json as unknown as {
      sandboxID: string;
    }[];
    expect(listed).toHaveLength(1);
    const id = listed[0]!.sandboxID;

    // Ctrl-C once the remote program runs: it is the one interrupted, not the prompt.
    const sleeping = async () =>
      (await aenv(['exec', id, '--', 'pgrep -x -f "sleep 1000" || true'])).stdout.trim();
    tmux('send-keys', '-t', 'st', 'sleep 1000', 'Enter');
    await eventually(async () => expect(await sleeping()).not.toBe(''));
    tmux('send-keys', '-t', 'st', 'C-c');
    tmux('send-keys', '-t', 'st', 'echo "after=$?"', 'Enter');
    await waitFor('st', /^after=130$/m);
    expect(await sleeping()).toBe('');

    tmux('send-keys', '-t', 'st', 'true', 'Enter');
    tmux('send-keys', '-t', 'st', 'C-d');
    await waitFor('st', /^AENV-EXITED:0$/m);
    expect(pane('st')).toMatch(new RegExp(`Killed sandbox ${id}`));
    expect((await api('GET', `/sandboxes/${id}`)).status).toBe(404);
  });

  it('fails clearly for an unknown sandbox', async () => {
    runInTmux('bad', 'connect nosuchsandbox0000000');
    await waitFor('bad', /^AENV-EXITED:1$/m);
    expect(pane('bad')).toMatch(/aenv: sandbox nosuchsandbox0000000 not found/);
  });
});
