/** Commands run to completion and child processes stopped, for fixtures that drive host tools. */
import { spawn, type ChildProcess } from 'node:child_process';

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to completion; never throws for a non-zero exit (the caller asserts on it). */
export function run(
  cmd: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; input?: string; cwd?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      env: opts.env ?? process.env,
      cwd: opts.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: opts.timeoutMs ?? 600_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
    // A command that exits without reading its input is fine.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

/** Like run(), but a non-zero exit is an error carrying the command's output. */
export async function mustRun(
  cmd: string,
  args: readonly string[],
  opts: Parameters<typeof run>[2] = {},
): Promise<string> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0)
    throw new Error(`${cmd} ${args.join(' ')} exited with ${r.code}:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
export async function terminate(child: ChildProcess | undefined, graceMs: number): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}
