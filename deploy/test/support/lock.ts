import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';

/** The machine-wide lock every test that starts daemons, sandboxes, dockerd or nspawn holds. */
export const E2E_LOCK = '/var/lock/aenv-e2e.lock';

function ancestors(): Set<number> {
  const pids = new Set<number>();
  for (let pid = process.pid; pid > 1;) {
    pids.add(pid);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  }
  return pids;
}

/** Whether a process this one runs under (`flock LOCK npm run test:deploy`) holds the lock already. */
function heldByAncestor(): boolean {
  let inode: number;
  try {
    inode = statSync(E2E_LOCK).ino;
  } catch {
    return false;
  }
  const mine = ancestors();
  return readFileSync('/proc/locks', 'utf8')
    .split('\n')
    .some((line) => {
      const f = line.trim().split(/\s+/);
      return f[1] === 'FLOCK' && Number(f[4]) > 0 && mine.has(Number(f[4])) && f[5]?.endsWith(`:${inode}`);
    });
}

/**
 * Takes the lock for this test file (waiting for other engineers' runs) and returns its release.
 * A `flock` child holds it until its stdin closes, so a crashed test process lets go too.
 */
export async function holdE2eLock(): Promise<() => void> {
  if (heldByAncestor()) return () => undefined;
  const child: ChildProcess = spawn('flock', ['-x', E2E_LOCK, '-c', 'echo held; exec cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`flock ${E2E_LOCK} exited with ${code}`)));
  });
  return () => child.stdin!.end();
}
