import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
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
export function runCommand(
  file: string,
  args: readonly string[],
  options: CommandOptions = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    // C locale: error texts we match on (and log) must not be translated.
    const child = spawn(file, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let size = 0;
    let failure: NetworkError | undefined;
    const collect = (into: Buffer[]) => (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_OUTPUT) {
        failure ??= new NetworkError(
          'COMMAND_FAILED',
          `${commandLine(file, args)}: output exceeds ${MAX_OUTPUT} bytes`,
        );
        child.kill('SIGKILL');
        return;
      }
      into.push(chunk);
    };
    child.stdout.on('data', collect(stdout));
    child.stderr.on('data', collect(stderr));
    const timeoutMs = options.timeoutMs ?? 30_000;
    const timer = setTimeout(() => {
      failure ??= new NetworkError(
        'COMMAND_FAILED',
        `${commandLine(file, args)}: timed out after ${timeoutMs} ms`,
      );
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (error.code === 'ENOENT') reject(missing(file.split('/').pop() ?? file));
      else
        reject(
          new NetworkError('COMMAND_FAILED', `${commandLine(file, args)}: ${error.message}`, {
            cause: error,
          }),
        );
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (failure) return reject(failure);
      const result = {
        code: code ?? -1,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
      };
      if (result.code === 0 || options.allowFailure) return resolve(result);
      const why =
        result.stderr.trim() || result.stdout.trim() || (signal ? `killed by ${signal}` : 'no output');
      reject(
        new NetworkError('COMMAND_FAILED', `${commandLine(file, args)} exited with ${result.code}: ${why}`),
      );
    });
    // A child that exits before reading its stdin must not crash us with EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

/** Runs tasks one at a time, in call order; a failed task does not block the ones after it. */
export class SerialQueue {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task);
    this.#tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
