import { spawn } from 'node:child_process';
import { withoutSecrets } from '@agentenv/common';

export interface ProcessOptions {
  /** Written to stdin, which is then closed; without it stdin is /dev/null. */
  readonly input?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** `timeoutSignal` after this long; the result then says `timedOut`. */
  readonly timeoutMs?: number;
  /** SIGKILL unless set: aenv-reaper takes SIGTERM as "stop the command" and stays for its sandbox. */
  readonly timeoutSignal?: NodeJS.Signals;
  /**
   * The result comes once stdout ends instead of once the process has exited, for a program that
   * closes stdout and runs on (aenv-reaper stays as long as the sandbox it adopted). The process
   * is then neither waited for nor kept referenced, and its stderr is no longer read; `code` and
   * `signal` are null unless it had exited.
   */
  readonly untilStdoutEnds?: boolean;
  /** Aborted: SIGTERM, and the result once the process has exited (and cleaned up after itself). */
  readonly signal?: AbortSignal;
  /** SIGKILL once stdout and stderr together exceed this; the result then says `outputExceeded`. */
  readonly maxOutputBytes?: number;
  /**
   * Each non-empty line of output as it arrives, so a command that takes minutes shows progress;
   * output is then not collected. `\r` ends a line too: progress bars redraw with it.
   */
  readonly onLine?: (line: string) => void;
  /**
   * stdout and stderr go to this file descriptor instead of pipes: a command that leaves a
   * detached process behind would otherwise have it inherit and hold the pipes open.
   */
  readonly outputFd?: number;
}

export interface ProcessResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
  readonly outputExceeded: boolean;
}

/** Something that runs a program to completion as runProcess does (the process spawner). */
export interface ProcessLauncher {
  run(file: string, args: readonly string[], opts?: ProcessOptions): Promise<ProcessResult>;
}

let launcher: ProcessLauncher | undefined;

/**
 * From now on runProcess starts programs through `l` (undefined: from this process again).
 * Process-wide on purpose: what a launcher saves is the cost of forking this process, which
 * every caller pays alike. Runs with `onLine` or `outputFd` still start here.
 */
export function launchProcessesWith(l: ProcessLauncher | undefined): void {
  launcher = l;
}

/**
 * Runs a program without a shell, to completion. Rejects only when it cannot be started (the
 * spawn error, e.g. ENOENT); an exit code, a timeout or too much output is in the result. The
 * program's environment (`opts.env`, else this process's) never holds a secret: see
 * withoutSecrets.
 */
export function runProcess(
  file: string,
  args: readonly string[],
  opts: ProcessOptions = {},
): Promise<ProcessResult> {
  if (launcher && !opts.onLine && opts.outputFd === undefined)
    return launcher.run(file, args, opts.env ? { ...opts, env: withoutSecrets(opts.env) } : opts);
  return new Promise((resolve, reject) => {
    const out = opts.outputFd ?? 'pipe';
    const child = spawn(file, args, {
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', out, out],
      env: withoutSecrets(opts.env),
    });
    if (opts.untilStdoutEnds) child.unref();
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let size = 0;
    let timedOut = false;
    let outputExceeded = false;
    const collect = (into: Buffer[]) => (chunk: Buffer) => {
      size += chunk.length;
      if (opts.maxOutputBytes !== undefined && size > opts.maxOutputBytes) {
        outputExceeded = true;
        child.kill('SIGKILL');
        return;
      }
      into.push(chunk);
    };
    for (const [stream, into] of [
      [child.stdout, stdout],
      [child.stderr, stderr],
    ] as const) {
      if (!stream) continue;
      if (opts.onLine) splitLines(stream, opts.onLine);
      else stream.on('data', collect(into));
    }
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            child.kill(opts.timeoutSignal ?? 'SIGKILL');
          }, opts.timeoutMs);
    const abort = () => child.kill('SIGTERM');
    if (opts.signal?.aborted) abort();
    opts.signal?.addEventListener('abort', abort, { once: true });
    const done = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', abort);
    };
    child.on('error', (err) => {
      done();
      reject(err);
    });
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      done();
      resolve({
        code,
        signal,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
        timedOut,
        outputExceeded,
      });
    };
    if (opts.untilStdoutEnds && child.stdout)
      child.stdout.once('end', () => {
        child.stderr?.destroy();
        finish(child.exitCode, child.signalCode);
      });
    else child.on('close', finish);
    if (child.stdin) {
      // A child that exits before reading its stdin must not crash us with EPIPE.
      child.stdin.on('error', () => undefined);
      child.stdin.end(opts.input);
    }
  });
}

function splitLines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buf = '';
  const emit = (line: string) => {
    if (line.trim()) onLine(line);
  };
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buf += chunk;
    const parts = buf.split(/\r?\n|\r/);
    buf = parts.pop() ?? '';
    for (const line of parts) emit(line);
  });
  stream.on('end', () => emit(buf));
}
