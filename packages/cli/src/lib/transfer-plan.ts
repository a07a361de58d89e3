import path from 'node:path';
import { CliError } from '../errors.js';

/**
 * Path mapping for `upload` and `download`, with `cp -r` / `scp -r` semantics: copying onto an
 * existing directory (or a path ending in `/`) puts the source inside it under its own name;
 * otherwise the destination is the new name. Remote paths are POSIX; local ones use `path`.
 */

export interface LocalEntry {
  /** Relative to the walked root, `/`-separated; '' is the root itself. */
  rel: string;
  kind: 'file' | 'dir';
  size: number;
  /** Permission bits (0o777). */
  mode?: number;
}

export interface RemoteEntry {
  path: string;
  kind: 'file' | 'dir' | 'other';
  size: number;
  /** Permission bits (0o777), for files. */
  mode: number;
  /** Set when the entry is a symlink (envd reports the target's type). */
  symlinkTarget?: string;
}

export interface FileCopy {
  from: string;
  to: string;
  size: number;
  mode?: number;
}

export interface TransferPlan {
  /** Directories to create, parents first (uploads: only those with nothing inside). */
  dirs: string[];
  files: FileCopy[];
  /** Entries left out, with the reason, for a warning. */
  skipped: string[];
  totalBytes: number;
}

/** The remote path an upload writes to (for a directory: the new directory's path). */
export function uploadDestination(localPath: string, remote: string, remoteIsDir: boolean): string {
  const base = path.basename(path.resolve(localPath));
  if (remoteIsDir || remote.endsWith('/')) return path.posix.join(remote, base);
  return remote;
}

/** The local path a download writes to. `local` undefined means the current directory. */
export function downloadDestination(
  remoteName: string,
  local: string | undefined,
  localIsDir: boolean,
  cwd = process.cwd(),
): string {
  if (!remoteName || remoteName === '/' || remoteName === '.' || remoteName === '..')
    throw new CliError(`cannot name the local copy of ${JSON.stringify(remoteName)}: give a local path`, 2);
  if (local === undefined) return path.join(cwd, remoteName);
  if (localIsDir || local.endsWith('/') || local.endsWith(path.sep)) return path.join(local, remoteName);
  return local;
}

/** Upload plan for a walked local tree rooted at `localRoot`, written under `remoteRoot`. */
export function planUpload(localRoot: string, entries: LocalEntry[], remoteRoot: string): TransferPlan {
  const plan: TransferPlan = { dirs: [], files: [], skipped: [], totalBytes: 0 };
  for (const e of entries) {
    const to = e.rel ? path.posix.join(remoteRoot, e.rel) : remoteRoot;
    if (e.kind === 'dir') plan.dirs.push(to);
    else {
      plan.files.push({
        from: e.rel ? path.join(localRoot, ...e.rel.split('/')) : localRoot,
        to,
        size: e.size,
        ...(e.mode !== undefined ? { mode: e.mode } : {}),
      });
      plan.totalBytes += e.size;
    }
  }
  // envd creates the parents of every uploaded file; only directories with nothing inside need an
  // explicit (mkdir -p) call.
  const targets = [...plan.dirs, ...plan.files.map((f) => f.to)];
  plan.dirs = plan.dirs.filter((d) => !targets.some((t) => t.startsWith(d.endsWith('/') ? d : `${d}/`)));
  return plan;
}

/**
 * Download plan for a remote tree listed under `remoteRoot`. Entries must lie under it; a path
 * that escapes (`..`) is refused rather than written outside `localRoot`.
 */
export function planDownload(remoteRoot: string, entries: RemoteEntry[], localRoot: string): TransferPlan {
  const plan: TransferPlan = { dirs: [localRoot], files: [], skipped: [], totalBytes: 0 };
  for (const e of entries) {
    const rel = path.posix.relative(remoteRoot, e.path);
    if (!rel || rel.startsWith('..') || path.posix.isAbsolute(rel))
      throw new CliError(`refusing remote entry outside ${remoteRoot}: ${e.path}`);
    const to = path.join(localRoot, ...rel.split('/'));
    if (e.kind === 'dir') {
      if (e.symlinkTarget !== undefined) plan.skipped.push(`${e.path} (symlink to a directory)`);
      else plan.dirs.push(to);
    } else if (e.kind === 'file') {
      plan.files.push({ from: e.path, to, size: e.size, mode: e.mode });
      plan.totalBytes += e.size;
    } else
      plan.skipped.push(`${e.path} (${e.symlinkTarget !== undefined ? 'dangling symlink' : 'not a file'})`);
  }
  // Files inside a skipped symlinked directory are never listed (ListDir does not follow links).
  return plan;
}

/** `dir/.name.aenv-<random>.tmp`: a sibling temp file, so the final rename stays on one filesystem. */
export function tempSibling(target: string, random: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.aenv-${random}.tmp`);
}

/**
 * Files whose permission bits differ from what envd gives a new file (0644), grouped by mode:
 * one `chmod` per group restores executables and private files after an upload.
 */
export function modeGroups(files: FileCopy[], defaultMode = 0o644): Map<number, string[]> {
  const groups = new Map<number, string[]>();
  for (const f of files) {
    if (f.mode === undefined || (f.mode & 0o777) === defaultMode) continue;
    const m = f.mode & 0o777;
    groups.set(m, [...(groups.get(m) ?? []), f.to]);
  }
  return groups;
}
