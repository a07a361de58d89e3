import { CliError } from '../errors.js';
import { explainEnvdError, type SandboxTarget } from '../client/envd.js';
import { KEEPALIVE_HEADERS, RemoteProcess } from '../client/remote-process.js';
import { exitCodeOf } from '../lib/args.js';

export interface ShellOptions {
  user?: string;
  cwd?: string;
  envs?: Record<string, string>;
  stdin?: NodeJS.ReadStream;
  stdout?: NodeJS.WriteStream;
}

/**
 * Runs an interactive login shell in the sandbox on a PTY and wires it to this terminal: raw
 * mode, window resizes (SIGWINCH → Update), Ctrl-C/Ctrl-D go to the remote side. Resolves with the
 * shell's exit code. When stdin is not a terminal its bytes are forwarded as typed input, and its
 * end is a Ctrl-D.
 */
export async function attachShell(target: SandboxTarget, opts: ShellOptions = {}): Promise<number> {
  const stdin = opts.stdin ?? process.stdin;
  const stdout = opts.stdout ?? process.stdout;
  const proc = new RemoteProcess(target, opts.user, 'pty');
  const size = () => ({ cols: stdout.columns || 80, rows: stdout.rows || 24 });
  const onResize = () => {
    if (proc.pid === undefined) return;
    proc.client.update({ process: proc.selector(), pty: { size: size() } }).catch(() => undefined);
  };

  const isTTY = Boolean(stdin.isTTY);
  if (isTTY) stdin.setRawMode(true);
  const detach = proc.forward(stdin, () => {
    if (!isTTY) proc.input.push(Buffer.from([4]));
  });
  stdout.on('resize', onResize);

  try {
    const events = proc.client.start(
      {
        process: {
          cmd: '/bin/bash',
          args: ['-i', '-l'],
          envs: { TERM: 'xterm-256color', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', ...opts.envs },
          ...(opts.cwd ? { cwd: opts.cwd } : {}),
        },
        pty: { size: size() },
      },
      { signal: proc.abort.signal, headers: KEEPALIVE_HEADERS },
    );
    for await (const res of events) {
      const ev = res.event?.event;
      if (!ev) continue;
      if (ev.case === 'start') {
        proc.started(ev.value.pid);
        // The terminal may have been resized between the request and the start event.
        onResize();
      } else if (ev.case === 'data' && ev.value.output.case === 'pty') {
        if (!stdout.write(ev.value.output.value)) await new Promise((r) => stdout.once('drain', r));
      } else if (ev.case === 'end') {
        return exitCodeOf(ev.value);
      }
    }
    throw new CliError(`the connection to sandbox ${target.sandboxID} ended before the shell exited`);
  } catch (err) {
    if (proc.inputError) throw await explainEnvdError(proc.inputError, target, 'sending input failed');
    throw await explainEnvdError(err, target, 'shell');
  } finally {
    stdout.off('resize', onResize);
    detach();
    if (isTTY) stdin.setRawMode(false);
  }
}
