import { chmodSync, lstatSync, mkdirSync, readdirSync, rmdirSync, rmSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import path from 'node:path';
import type { Logger } from 'pino';
import type { EnvdState } from '../state.js';
import { SudoSession } from './session.js';

export interface SudoServiceOptions {
  /** The Unix socket clients connect to, e.g. /run/aenv-envd/sudo.sock. */
  socketPath: string;
  state: EnvdState;
  logger: Logger;
}

export interface SudoService {
  socketPath: string;
  /** Where clients create their proof files. */
  authDir: string;
  close(): Promise<void>;
}

/** Makes `dir` a root-owned directory with exactly `mode`; refuses one someone else owns. */
function ensureRootDir(dir: string, mode: number): void {
  mkdirSync(dir, { recursive: true, mode });
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== 0) {
    throw new Error(`${dir} is not a directory owned by root; refusing to use it`);
  }
  chmodSync(dir, mode);
}

/** Whether something accepts connections on the socket at `p`. */
function answers(p: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(p);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
}

/**
 * envd's privileged-exec service, which the `sudo` of the tools bundle talks to. gVisor runs
 * every sandbox process with no_new_privs, so a setuid sudo cannot work; envd runs as root and
 * starts commands for any user already, so it runs them for sudoers too.
 *
 * Layout: <dir>/ (root, 0755) holds the socket (0666: anyone may connect and ask, the service
 * decides) and <dir>/<name>-auth/ (root, 01733: anyone may create a file there, nobody else
 * may list, delete or rename it), where each client proves its uid with a file (see
 * verifyProof). The socket's permissions cannot be what authorizes: processes envd starts have
 * no supplementary groups, so a socket restricted to group sudo would shut out its members.
 */
export async function startSudoService(opts: SudoServiceOptions): Promise<SudoService> {
  const socketPath = path.resolve(opts.socketPath);
  const dir = path.dirname(socketPath);
  const authDir = path.join(dir, `${path.basename(socketPath).replace(/\.sock$/, '')}-auth`);
  ensureRootDir(dir, 0o755);
  ensureRootDir(authDir, 0o1733);
  for (const stale of readdirSync(authDir))
    rmSync(path.join(authDir, stale), { force: true, recursive: true });
  try {
    if (!lstatSync(socketPath).isSocket()) throw new Error(`${socketPath} exists and is not a socket`);
    if (await answers(socketPath)) throw new Error(`another envd serves ${socketPath}`);
    rmSync(socketPath); // left by an envd that did not shut down cleanly
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }

  const sessions = new Set<SudoSession>();
  const server: Server = createServer((socket) => {
    const session = new SudoSession(socket, {
      state: opts.state,
      logger: opts.logger,
      authDir,
      onClose: (s) => sessions.delete(s),
    });
    sessions.add(session);
    session.start();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  chmodSync(socketPath, 0o666);
  opts.logger.info({ socket: socketPath }, 'sudo service listening');

  return {
    socketPath,
    authDir,
    async close() {
      for (const s of sessions) s.kill();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(socketPath, { force: true });
      rmSync(authDir, { recursive: true, force: true });
      try {
        rmdirSync(dir); // when nothing else is in it
      } catch {
        // not empty, or not ours to remove
      }
    },
  };
}
