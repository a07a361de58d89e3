import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { API_KEY, URL_BASE } from '@agentenv/test-support/server';

/** The built CLI (packages/cli/bin/aenv.js → dist); `npm run build` makes it. */
export const AENV_BIN = fileURLToPath(new URL('../../bin/aenv.js', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  stdoutBytes: Buffer;
}

export interface CliOptions {
  /** Bytes for stdin; without it stdin is /dev/null. */
  input?: string | Buffer;
  /** Replaces AENV_URL / AENV_API_KEY (pass undefined values to drop them). */
  env?: Record<string, string | undefined>;
  timeoutMs?: number;
  /** Another entry point (the single-file bundle). */
  bin?: string;
}

/** The environment a user of the test server would have: AENV_URL and AENV_API_KEY. */
export function cliEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, AENV_URL: URL_BASE, AENV_API_KEY: API_KEY, ...extra };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  // The tests drive the E2B SDK elsewhere; make sure nothing leaks into the CLI.
  delete env.E2B_API_KEY;
  return env;
}

/** Runs `aenv <args>` as a separate process (stdout not a terminal: JSON output by default). */
export function aenv(args: string[], opts: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [opts.bin ?? AENV_BIN, ...args], {
      env: cliEnv(opts.env),
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout!.on('data', (d: Buffer) => out.push(d));
    child.stderr!.on('data', (d: Buffer) => err.push(d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const stdoutBytes = Buffer.concat(out);
      resolve({ code, stdout: stdoutBytes.toString(), stderr: Buffer.concat(err).toString(), stdoutBytes });
    });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
  });
}

/** Runs aenv and parses its JSON stdout, failing with the output when the exit code is not 0. */
export async function aenvJson<T = unknown>(args: string[], opts: CliOptions = {}): Promise<T> {
  const r = await aenv(args, opts);
  if (r.code !== 0) throw new Error(`aenv ${args.join(' ')} exited ${r.code}\n${r.stderr}\n${r.stdout}`);
  return JSON.parse(r.stdout) as T;
}
