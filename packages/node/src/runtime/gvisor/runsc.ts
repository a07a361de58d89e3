import { runProcess, type ProcessResult } from '../../util/index.js';

/** Flags every runsc invocation for one sandbox must repeat (runsc keeps no per-sandbox flags). */
export interface RunscFlags {
  readonly root: string;
  /** `--overlay2` value, e.g. `root:memory` or `root:dir=/run/aenv/sandboxes/<id>/upper`. */
  readonly overlay: string;
  readonly network: 'sandbox' | 'none';
  readonly netDisconnectOk: boolean;
}

export function runscGlobalArgs(f: RunscFlags): string[] {
  return [
    `--root=${f.root}`,
    '--platform=systrap',
    `--overlay2=${f.overlay}`,
    `--network=${f.network}`,
    // The guest then sees cpuCount CPUs instead of the host's count (runsc's floor is 2).
    '--cpu-num-from-quota',
    ...(f.netDisconnectOk ? ['--net-disconnect-ok'] : []),
  ];
}

/**
 * Some kernels (this project's CI included) expose /proc/sys/net/core/rmem_default in every
 * network namespace, which runsc takes for "running in the root namespace" and refuses to start.
 * Hiding /proc/sys/net in a private mount namespace for the runsc process tree fixes it.
 */
export function wrapForNetSysctlQuirk(argv: readonly string[]): string[] {
  return [
    'unshare',
    '--mount',
    '--propagation',
    'private',
    '--',
    '/bin/sh',
    '-c',
    'mount -t tmpfs -o size=4k,mode=555 aenv-sysctl-net /proc/sys/net && exec "$@"',
    'aenv-runsc',
    ...argv,
  ];
}

export type CommandResult = Pick<ProcessResult, 'code' | 'stdout' | 'stderr' | 'timedOut'>;

/**
 * Runs one command to completion (util's runProcess). stdin is /dev/null and stdout/stderr are
 * pipes: `runsc exec` otherwise takes over the caller's terminal. Commands that leave a detached
 * sandbox behind must not use pipes (the sandbox would inherit and hold them open): see
 * `stdoutFd`, or reaper.ts.
 */
export async function runCommand(
  argv: readonly string[],
  opts: { timeoutMs: number; stdoutFd?: number },
): Promise<CommandResult> {
  const [cmd, ...args] = argv;
  if (!cmd) throw new Error('empty command');
  return runProcess(cmd, args, {
    timeoutMs: opts.timeoutMs,
    ...(opts.stdoutFd !== undefined ? { outputFd: opts.stdoutFd } : {}),
  });
}

/** One line summarising a failed command, for error messages. */
export function describeFailure(what: string, r: CommandResult): string {
  if (r.timedOut) return `${what} timed out`;
  const msg = (r.stderr || r.stdout).trim().split('\n').filter(Boolean).slice(-3).join(' | ');
  return `${what} failed (exit ${r.code})${msg ? `: ${msg}` : ''}`;
}

/** runsc's error when the sandbox holds an established external TCP connection. */
export function isConnectedStateError(text: string): boolean {
  return /connected state|cannot be saved/i.test(text);
}
