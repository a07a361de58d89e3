import { chown, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { invalidArgument } from '../errors.js';

/**
 * mkdir -p that hands every directory it creates to uid:gid (mode 0755 before umask), as E2B's
 * envd does for MakeDir, Move destinations and uploads. Existing directories are left alone; a
 * non-directory in the way is an invalid_argument error.
 */
export async function ensureDirs(dir: string, uid: number, gid: number): Promise<void> {
  const chain: string[] = [];
  for (let p = path.resolve(dir); ; p = path.dirname(p)) {
    chain.unshift(p);
    if (p === path.dirname(p)) break;
  }
  for (const p of chain) {
    let isDir: boolean;
    try {
      isDir = (await stat(p)).isDirectory();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      try {
        await mkdir(p, 0o755);
      } catch (mkdirErr) {
        if ((mkdirErr as NodeJS.ErrnoException).code !== 'EEXIST') throw mkdirErr;
      }
      // Also when someone else created it in between: they may not have chowned it yet.
      await chown(p, uid, gid);
      continue;
    }
    if (!isDir) throw invalidArgument(`path is a file: ${p}`);
  }
}
