import type { Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { EntryInfo } from '@agentenv/protocol';
import { EnvdError, invalidArgument, toEnvdError } from '../errors.js';
import { entryInfoIfExists, type Namer } from './entry.js';

/** How many entries of one directory are stat'ed at once. */
const STAT_CONCURRENCY = 64;

/** Byte-wise name order, as Go's os.ReadDir sorts (UTF-16 order differs above the BMP). */
export function compareNames(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** Reads a directory's entries in Go's order; a directory that vanished meanwhile is empty. */
export async function readDirSorted(dir: string): Promise<Dirent[]> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries.sort((a, b) => compareNames(a.name, b.name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/**
 * ListDir as E2B's envd answers it: the tree under `requested` (symlinks to it followed, symlinks
 * inside it not) down to `depth` levels (0 means 1), in lexical pre-order like Go's WalkDir, each
 * entry's path under `requested` rather than under the resolved directory. Entries that vanish
 * while listing are skipped.
 */
export async function listDir(requested: string, depth: number, namer: Namer): Promise<EntryInfo[]> {
  const maxDepth = Math.max(depth, 1);
  let resolved: string;
  try {
    resolved = await realpath(requested);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') {
      throw new EnvdError('failed_precondition', `cyclic symlink or chain >40 links at '${requested}'`);
    }
    throw toEnvdError(err, requested);
  }
  if (!(await stat(resolved)).isDirectory()) throw invalidArgument(`path is not a directory: ${requested}`);

  const out: EntryInfo[] = [];
  const walk = async (rel: string, level: number): Promise<void> => {
    const dirents = await readDirSorted(path.join(resolved, rel));
    for (let i = 0; i < dirents.length; i += STAT_CONCURRENCY) {
      const chunk = dirents.slice(i, i + STAT_CONCURRENCY);
      const infos = await Promise.all(
        chunk.map((d) => entryInfoIfExists(path.join(resolved, rel, d.name), namer)),
      );
      for (let j = 0; j < chunk.length; j++) {
        const info = infos[j];
        if (!info) continue;
        const childRel = path.join(rel, chunk[j]!.name);
        info.path = path.join(requested, childRel);
        out.push(info);
        if (chunk[j]!.isDirectory() && level < maxDepth) await walk(childRel, level + 1);
      }
    }
  };
  await walk('', 1);
  return out;
}
