import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { runProcess } from '../util/index.js';
import { NetworkError } from './errors.js';

/** Debian package that ships each program we run, for "install X" error messages. */
const DEBIAN_PACKAGE: Readonly<Record<string, string>> = {
  ip: 'iproute2',
  iptables: 'iptables',
  'iptables-restore': 'iptables',
  'iptables-save': 'iptables',
  'iptables-nft': 'iptables',
  'iptables-nft-restore': 'iptables',
  'iptables-nft-save': 'iptables',
  'iptables-legacy': 'iptables',
  'iptables-legacy-restore': 'iptables',
  'iptables-legacy-save': 'iptables',
  sysctl: 'procps',
  unshare: 'util-linux',
};

function missing(name: string): NetworkError {
  const pkg = DEBIAN_PACKAGE[name];
  const hint = pkg ? `install the Debian package "${pkg}" (scripts/setup.sh does)` : 'install it';
  return new NetworkError(
    'MISSING_BINARY',
    `"${name}" was not found on PATH or in /usr/sbin, /sbin: ${hint}`,
  );
}

/**
 * Absolute path of a program. The sbin directories are searched too: a node started from a
 * non-login shell or a service manager often lacks them on PATH, where ip and iptables live.
 */
export async function findBinary(name: string): Promise<string> {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not in this directory.
    }
  }
  throw missing(name);
}

export interface CommandResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CommandOptions {
  /** Written to stdin (iptables-restore rules, `ip -batch -` commands). */
  readonly input?: string;
  readonly timeoutMs?: number;
  /** Return the result for a non-zero exit instead of throwing. */
  readonly allowFailure?: boolean;
}

const MAX_OUTPUT = 32 * 1024 * 1024;

function commandLine(file: string, args: readonly string[]): string {
  return [file, ...args].join(' ');
}

/** Runs a program without a shell; a non-zero exit becomes a COMMAND_FAILED error with its stderr. */
export async function runCommand(
  file: string,
  args: readonly string[],
  options: CommandOptions = {},
): Promise<CommandResult> {
  const line = commandLine(file, args);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const r = await runProcess(file, args, {
    input: options.input ?? '',
    // C locale: error texts we match on (and log) must not be translated.
    env: { ...process.env, LC_ALL: 'C' },
    timeoutMs,
    maxOutputBytes: MAX_OUTPUT,
  }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') throw missing(file.split('/').pop() ?? file);
    throw new NetworkError('COMMAND_FAILED', `${line}: ${error.message}`, { cause: error });
  });
  if (r.outputExceeded)
    throw new NetworkError('COMMAND_FAILED', `${line}: output exceeds ${MAX_OUTPUT} bytes`);
  if (r.timedOut) throw new NetworkError('COMMAND_FAILED', `${line}: timed out after ${timeoutMs} ms`);
  const result = { code: r.code ?? -1, stdout: r.stdout, stderr: r.stderr };
  if (result.code === 0 || options.allowFailure) return result;
  const why =
    result.stderr.trim() || result.stdout.trim() || (r.signal ? `killed by ${r.signal}` : 'no output');
  throw new NetworkError('COMMAND_FAILED', `${line} exited with ${result.code}: ${why}`);
}
