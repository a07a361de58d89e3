import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { UsageError } from '../errors.js';
import { globToRegExp, hasGlob, isIgnored, parseIgnoreFile } from './glob.js';
import type { TarEntry } from './tar.js';

/** A file or directory of the build context that a COPY step sends. */
export interface ContextFile {
  /** Relative to the context directory, `/`-separated: the name inside the uploaded archive. */
  rel: string;
  full: string;
  kind: 'file' | 'dir';
  mode: number;
  size: number;
  mtime: number;
}

/** `.dockerignore` of the context, as matchers. */
export async function readIgnore(contextDir: string): Promise<RegExp[]> {
  try {
    return parseIgnoreFile(await readFile(path.join(contextDir, '.dockerignore'), 'utf8'));
  } catch {
    return [];
  }
}

function toRel(contextDir: string, full: string): string {
  return path.relative(contextDir, full).split(path.sep).join('/');
}

async function entry(contextDir: string, full: string): Promise<ContextFile | undefined> {
  const st = await stat(full).catch(() => undefined);
  if (!st || (!st.isFile() && !st.isDirectory())) return undefined;
  return {
    rel: toRel(contextDir, full),
    full,
    kind: st.isDirectory() ? 'dir' : 'file',
    mode: st.mode,
    size: st.isFile() ? st.size : 0,
    mtime: Math.floor(st.mtimeMs / 1000),
  };
}

/**
 * The files a `COPY <src>` sends: the source (a path, or a pattern with wildcards in its last
 * segment) and, for directories, everything below; minus `.dockerignore` matches; sorted by path.
 */
export async function collectCopySources(
  contextDir: string,
  src: string,
  ignore: RegExp[],
): Promise<ContextFile[]> {
  const cleaned = src.replace(/^\.?\/+/, '') || '.';
  const resolved = path.resolve(contextDir, cleaned);
  if (resolved !== contextDir && !resolved.startsWith(contextDir + path.sep))
    throw new UsageError(`COPY source ${src} is outside the build context ${contextDir}`);
  let roots: string[];
  if (hasGlob(path.basename(cleaned))) {
    if (hasGlob(path.dirname(cleaned)))
      throw new UsageError(`COPY ${src}: wildcards are supported in the last path segment only`);
    const dir = path.dirname(resolved);
    const re = globToRegExp(path.basename(cleaned));
    roots = (await readdir(dir).catch(() => [] as string[]))
      .filter((n) => re.test(n))
      .map((n) => path.join(dir, n));
  } else roots = [resolved];

  const out = new Map<string, ContextFile>();
  const add = async (full: string): Promise<void> => {
    const rel = toRel(contextDir, full);
    if (rel && isIgnored(rel, ignore)) return;
    const e = await entry(contextDir, full);
    if (!e) return;
    if (rel) out.set(full, e);
    if (e.kind === 'dir') for (const n of await readdir(full)) await add(path.join(full, n));
  };
  for (const r of roots) await add(r);
  if (out.size === 0) throw new UsageError(`COPY ${src}: no files found in ${contextDir}`);
  return [...out.values()].sort((a, b) => (a.full < b.full ? -1 : a.full > b.full ? 1 : 0));
}

/** E2B's cache key for a COPY step: the instruction, then each path, mode, size and content. */
export async function filesHash(src: string, dest: string, files: ContextFile[]): Promise<string> {
  const hash = createHash('sha256');
  hash.update(`COPY ${src} ${dest}`);
  for (const f of files) {
    hash.update(f.rel);
    hash.update(f.mode.toString());
    hash.update(f.size.toString());
    if (f.kind === 'file') for await (const chunk of createReadStream(f.full)) hash.update(chunk as Buffer);
  }
  return hash.digest('hex');
}

export function tarEntries(files: ContextFile[]): TarEntry[] {
  return files.map((f) => ({
    name: f.rel,
    kind: f.kind,
    mode: f.mode,
    size: f.size,
    mtime: f.mtime,
    ...(f.kind === 'file' ? { source: f.full } : {}),
  }));
}
