import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { ENVD_PORT } from '@agentenv/protocol';
import { packageDir } from '../paths.js';

// AENV_TEST_ENVD_MAIN runs the same tests against another build of envd (e.g. a bundle).
const MAIN = process.env.AENV_TEST_ENVD_MAIN ?? `${packageDir('@agentenv/envd')}/dist/main.js`;
export { ENVD_PORT };
export const ENVD_URL = `http://127.0.0.1:${ENVD_PORT}`;

/** The sandbox convention: a `user` account with a home, made here if the host lacks one. */
export function ensureTestUser(): void {
  try {
    execFileSync('id', ['user'], { stdio: 'ignore' });
  } catch {
    execFileSync('useradd', ['-m', '-s', '/bin/bash', 'user']);
  }
}

/** Hides root's shell start-up files behind /dev/null, then becomes the given command (same pid). */
const WITHOUT_ROOT_DOTFILES =
  'for f in /root/.bashrc /root/.profile /root/.bash_profile /root/.bash_login; do ' +
  '[ -f "$f" ] && mount --bind /dev/null "$f"; done; exec "$@"';

export interface EnvdProcess {
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts the built envd on the E2B debug port as root (it must switch users) and points the
 * E2B SDK's debug mode at it.
 */
export async function startEnvdProcess(args: string[] = []): Promise<EnvdProcess> {
  ensureTestUser();
  process.env.E2B_DEBUG = 'true';
  // Commands run as root are `bash -l` with HOME=/root: the host's own dotfiles would run in every
  // one (a version manager's `init` there takes a lock that a killed shell leaves behind, and then
  // every later login shell waits a minute). envd sees the host's files, mounts made later included,
  // but root's shell start-up files read as empty, as in a fresh sandbox.
  const envd = [process.execPath, MAIN, '--port', String(ENVD_PORT), ...args];
  const child = spawn(
    'unshare',
    ['--mount', '--propagation', 'slave', '--', 'sh', '-c', WITHOUT_ROOT_DOTFILES, 'sh', ...envd],
    { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, AENV_ENVD_LOG_LEVEL: 'warn' } },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`envd exited with ${child.exitCode}`);
    try {
      const r = await fetch(`${ENVD_URL}/health`);
      if (r.status === 204) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error('envd did not answer /health within 15 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    child,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** POST /init as the node would. */
export async function initEnvd(body: Record<string, unknown>, token?: string): Promise<Response> {
  return fetch(`${ENVD_URL}/init`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { 'x-access-token': token } : {}) },
    body: JSON.stringify(body),
  });
}
