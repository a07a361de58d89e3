import { Code, ConnectError } from '@connectrpc/connect';
import { Signal } from '@agentenv/protocol';
import { explainEnvdError, type SandboxTarget } from '../client/envd.js';
import { KEEPALIVE_HEADERS, RemoteProcess } from '../client/remote-process.js';
import { CliError } from '../errors.js';
import { exitCodeOf } from '../lib/args.js';

export interface ExecOptions {
  cwd?: string;
  user?: string;
  envs: Record<string, string>;
  /** Process lifetime in seconds; undefined = no limit. */
  timeout?: number;
  stdin: boolean;
}

async function write(stream: NodeJS.WriteStream, data: Uint8Array): Promise<void> {
  if (!stream.write(data)) await new Promise((r) => stream.once('drain', r));
}

/**
 * Runs `bash -l -c <line>` in the sandbox, streaming stdout and stderr to ours separately and
 * forwarding our stdin when asked. Ctrl-C sends SIGTERM to the remote process (twice: give up).
 * Resolves with the remote exit code.
 */
export async function execRemote(target: SandboxTarget, line: string, opts: ExecOptions): Promise<number> {
  const proc = new RemoteProcess(target, opts.user, 'stdin');
  const { client } = proc;
  let detach: () => void = () => undefined;
  const closeStdin = async () => {
    await proc.input.idle();
    if (!proc.inputError) await client.closeStdin({ process: proc.selector() }).catch(() => undefined);
  };
  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    if (interrupts > 1 || proc.pid === undefined) proc.abort.abort();
    else client.sendSignal({ process: proc.selector(), signal: Signal.SIGTERM }).catch(() => undefined);
  };
  process.on('SIGINT', onSigint);

  try {
    const events = client.start(
      {
        process: {
          cmd: '/bin/bash',
          args: ['-l', '-c', line],
          envs: opts.envs,
          ...(opts.cwd ? { cwd: opts.cwd } : {}),
        },
        stdin: opts.stdin,
      },
      {
        signal: proc.abort.signal,
        headers: KEEPALIVE_HEADERS,
        ...(opts.timeout ? { timeoutMs: opts.timeout * 1000 } : {}),
      },
    );
    for await (const res of events) {
      const ev = res.event?.event;
      if (!ev) continue;
      if (ev.case === 'start') {
        proc.started(ev.value.pid);
        if (opts.stdin) detach = proc.forward(process.stdin, () => void closeStdin());
      } else if (ev.case === 'data') {
        const out = ev.value.output;
        if (out.case === 'stdout') await write(process.stdout, out.value);
        else if (out.case === 'stderr') await write(process.stderr, out.value);
      } else if (ev.case === 'end') {
        if (ev.value.error && !ev.value.exited && !/^signal: /.test(ev.value.status))
          throw new CliError(`the command could not run: ${ev.value.error}`);
        return exitCodeOf(ev.value);
      }
    }
    throw new CliError(`the connection to sandbox ${target.sandboxID} ended before the command did`);
  } catch (err) {
    if (interrupts > 1) return 130;
    // The deadline (Connect-Timeout-Ms) is the process lifetime: envd killed it. Exit like timeout(1).
    if (opts.timeout && err instanceof ConnectError && err.code === Code.DeadlineExceeded)
      throw new CliError(`the command timed out after ${opts.timeout} s and was killed`, 124);
    throw await explainEnvdError(proc.inputError ?? err, target, 'exec');
  } finally {
    process.off('SIGINT', onSigint);
    detach();
  }
}
