import { spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { closeSync, openSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runCommand, wrapForNetSysctlQuirk, type CommandResult } from './runsc.js';

/** Built by `npm run build:native -w @agentenv/node` from native/aenv-reaper.c. */
export const DEFAULT_REAPER_PATH = fileURLToPath(
  new URL('../../../native/build/aenv-reaper', import.meta.url),
);

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
 */
export function runDetached(
  argv: readonly string[],
  opts: { logPath: string; timeoutMs: number; reaperPath: string | null; hideNetSysctl?: boolean },
): Promise<CommandResult> {
  if (!opts.reaperPath) {
    const fd = openSync(opts.logPath, 'a', 0o600);
    const wrapped = opts.hideNetSysctl ? wrapForNetSysctlQuirk(argv) : argv;
    return runCommand(wrapped, { timeoutMs: opts.timeoutMs, stdoutFd: fd }).finally(() => closeSync(fd));
  }
  const reaper = opts.reaperPath;
  const flags = opts.hideNetSysctl ? ['--hide-net-sysctl'] : [];
  return new Promise((resolve, reject) => {
    const child = spawn(reaper, [...flags, opts.logPath, '--', ...argv], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // It outlives the command (as long as the sandbox runs): never hold the node's event loop.
    child.unref();
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
    }, opts.timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    // stdout ends when the command has exited (the reaper reports and closes it), or with the
    // reaper itself if it failed before running anything.
    child.stdout.on('end', () => {
      clearTimeout(timer);
      const m = /^(exit|signal) (\d+)$/m.exec(stdout);
      const code = m?.[1] === 'exit' ? Number(m[2]) : m ? 128 + Number(m[2]) : -1;
      resolve({ code, stdout: '', stderr: stderr || (m ? '' : 'aenv-reaper failed'), timedOut });
    });
  });
}
