import { access, constants } from 'node:fs/promises';
import { closeSync, openSync } from 'node:fs';
import { packageFile, runProcess } from '../../util/index.js';
import { runCommand, wrapForNetSysctlQuirk, type CommandResult } from './runsc.js';

/** Built by `npm run build:native -w @agentenv/node` from native/aenv-reaper.c. */
export const DEFAULT_REAPER_PATH = packageFile('native/build/aenv-reaper');

export async function reaperAvailable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

/**
 * Runs a command that leaves a detached sandbox behind (`runsc run|restore --detach`), with its
 * output (and the sandbox's, which inherits it) appended to `logPath`: pipes would stay open for
 * the sandbox's whole life.
 *
 * With `reaperPath`, the command runs under aenv-reaper, which adopts the processes runsc leaves
 * running and reaps them as soon as they exit. Without it they are re-parented to PID 1, and a
 * killed sandbox stays a zombie (and `runsc delete` waits) until init gets round to it.
 * `hideNetSysctl`: see wrapForNetSysctlQuirk (the reaper does the same without three more execs).
 * `mergePages`: the reaper lets KSM merge the command's and its children's memory (aenv-reaper.c);
 * without the reaper nothing is merged.
 */
export async function runDetached(
  argv: readonly string[],
  opts: {
    logPath: string;
    timeoutMs: number;
    reaperPath: string | null;
    hideNetSysctl?: boolean;
    mergePages?: boolean;
  },
): Promise<CommandResult> {
  if (!opts.reaperPath) {
    const fd = openSync(opts.logPath, 'a', 0o600);
    const wrapped = opts.hideNetSysctl ? wrapForNetSysctlQuirk(argv) : argv;
    return runCommand(wrapped, { timeoutMs: opts.timeoutMs, stdoutFd: fd }).finally(() => closeSync(fd));
  }
  const flags = [
    ...(opts.hideNetSysctl ? ['--hide-net-sysctl'] : []),
    ...(opts.mergePages ? ['--merge-pages'] : []),
  ];
  // stdout ends when the command has exited (the reaper reports it and closes stdout), or with the
  // reaper itself if it failed before running anything; the reaper stays as long as the sandbox.
  // SIGTERM on timeout stops the command, not the reaper.
  const r = await runProcess(opts.reaperPath, [...flags, opts.logPath, '--', ...argv], {
    timeoutMs: opts.timeoutMs,
    timeoutSignal: 'SIGTERM',
    untilStdoutEnds: true,
  });
  const m = /^(exit|signal) (\d+)$/m.exec(r.stdout);
  const code = m?.[1] === 'exit' ? Number(m[2]) : m ? 128 + Number(m[2]) : -1;
  return { code, stdout: '', stderr: r.stderr || (m ? '' : 'aenv-reaper failed'), timedOut: r.timedOut };
}
