import path from 'node:path';
import { invalid } from '@agentenv/common';
import { TOOLS_SANDBOX_PATH } from '../envd/index.js';

/** E2B's volume names: short, DNS-label-like, so they are safe as directory and log names. */
const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_-]{0,62}$/;

/** Sandbox paths a volume may not cover: the kernel's views and the node's own tools mount. */
const RESERVED_MOUNT_ROOTS = ['/proc', '/sys', '/dev', TOOLS_SANDBOX_PATH];

/** Throws 400 unless `name` is a valid volume name. */
export function checkVolumeName(name: string): string {
  if (!NAME.test(name))
    throw invalid(
      `invalid volume name ${JSON.stringify(name)}: 1-63 letters, digits, '-' or '_', starting with a letter or digit`,
    );
  return name;
}

/**
 * A content-API path as segments relative to the volume's root. Absolute and relative paths
 * both mean "inside the volume"; `..`, NUL and empty input are refused rather than normalised
 * away, so a client never reaches a different file than the one it named.
 */
export function volumeRelativePath(p: string): string[] {
  if (typeof p !== 'string' || p.length === 0) throw invalid('path is required');
  if (p.length > 4096) throw invalid('path is longer than 4096 characters');
  if (p.includes('\0')) throw invalid('path contains a NUL byte');
  const segments = p.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw invalid(`path ${JSON.stringify(p)} leaves the volume ('..')`);
  for (const s of segments)
    if (Buffer.byteLength(s) > 255) throw invalid(`path segment ${s.slice(0, 32)}… is too long`);
  return segments;
}

/** The path as the API shows it: absolute within the volume. */
export const displayPath = (segments: readonly string[]): string => '/' + segments.join('/');

/** Throws 400 unless `p` is a place in a sandbox where a volume may be mounted. */
export function checkMountPath(p: string): string {
  if (!p.startsWith('/')) throw invalid(`volume mount path ${JSON.stringify(p)} is not absolute`);
  // A mount path is one line: a filesystem-only pause passes the paths to leave out one per line.
  if ([...p].some((c) => c < ' ' || c === '\x7f'))
    throw invalid('volume mount path contains a control character');
  if (p.split('/').includes('..')) throw invalid(`volume mount path ${JSON.stringify(p)} contains '..'`);
  const norm = path.posix.normalize(p).replace(/\/+$/, '');
  if (norm === '') throw invalid('a volume cannot be mounted at /');
  for (const root of RESERVED_MOUNT_ROOTS) {
    if (norm === root || norm.startsWith(root + '/'))
      throw invalid(`volume mount path ${p} is under ${root}, which the sandbox's system owns`);
  }
  return norm;
}

/** Throws 400 when two mounts share a path or one volume list is oversized. */
export function checkMountList(mounts: readonly { name: string; path: string }[], max: number): void {
  if (mounts.length > max) throw invalid(`at most ${max} volume mounts per sandbox`);
  const seen = new Set<string>();
  for (const m of mounts) {
    const p = checkMountPath(m.path);
    if (seen.has(p)) throw invalid(`two volumes are mounted at ${p}`);
    seen.add(p);
  }
}
