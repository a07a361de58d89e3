import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { cp, link, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** File-level steps of assembling a release tree: pruned copies, hard links, checksums. */

/**
 * Parts of installed packages that are never loaded at run time: a native module's compiler
 * objects, and prebuilt binaries for other platforms (node-pty ships Windows and macOS ones).
 */
export function prunedAway(relative: string, platformArch: string): boolean {
  const parts = relative.split(path.sep);
  const build = parts.indexOf('build');
  if (build >= 0) {
    const rest = parts.slice(build + 1);
    if (rest[0] === 'deps') return true;
    if (rest[0] === 'Release' && ['obj.target', 'obj', '.deps'].includes(rest[1] ?? '')) return true;
  }
  const prebuilds = parts.indexOf('prebuilds');
  if (prebuilds >= 0 && parts[prebuilds + 1] && parts[prebuilds + 1] !== platformArch) return true;
  return false;
}

/**
 * Copies one installed package without its own node_modules (nested dependencies are copied as
 * entries of their own, only when the release needs them) and without what prunedAway() drops.
 */
export async function copyModule(src: string, dest: string, platformArch: string): Promise<void> {
  await cp(src, dest, {
    recursive: true,
    verbatimSymlinks: true,
    filter: (from) => {
      const relative = path.relative(src, from);
      if (relative === '') return true;
      if (relative.split(path.sep)[0] === 'node_modules') return false;
      return !prunedAway(relative, platformArch);
    },
  });
}

/** Copies a workspace package's built output: the listed entries, without type declarations. */
export async function copyBuilt(src: string, dest: string, entries: readonly string[]): Promise<void> {
  for (const entry of entries) {
    await cp(path.join(src, entry), path.join(dest, entry), {
      recursive: true,
      verbatimSymlinks: true,
      filter: (from) => !/\.d\.ts(\.map)?$|\.tsbuildinfo$/.test(from),
    });
  }
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** `dest` becomes the same file as `src` when their contents match (stored once in a tarball). */
export async function linkOrCopy(src: string, dest: string, sameAs?: string): Promise<'linked' | 'copied'> {
  if (sameAs && (await sha256File(src)) === (await sha256File(sameAs))) {
    await link(sameAs, dest);
    return 'linked';
  }
  await cp(src, dest);
  return 'copied';
}

async function* regularFiles(root: string, dir = root): AsyncGenerator<string> {
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* regularFiles(root, full);
    else if (entry.isFile()) yield path.relative(root, full);
  }
}

/** Writes `SHA256SUMS` (sha256sum -c format) for every regular file under root. */
export async function writeChecksums(root: string, name = 'SHA256SUMS'): Promise<number> {
  const lines: string[] = [];
  for await (const file of regularFiles(root)) {
    if (file === name) continue;
    lines.push(`${await sha256File(path.join(root, file))}  ${file}`);
  }
  await writeFile(path.join(root, name), `${lines.join('\n')}\n`);
  return lines.length;
}

export async function totalSize(root: string): Promise<number> {
  let bytes = 0;
  const seen = new Set<number>();
  for await (const file of regularFiles(root)) {
    const s = await stat(path.join(root, file));
    if (seen.has(s.ino)) continue;
    seen.add(s.ino);
    bytes += s.size;
  }
  return bytes;
}
