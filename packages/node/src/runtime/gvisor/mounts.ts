import { readFile } from 'node:fs/promises';
import { runCommand, describeFailure } from './runsc.js';

/** Mount points of this mount namespace (octal escapes decoded). */
export async function mountPoints(): Promise<Set<string>> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    const field = line.split(' ')[4];
    if (field) out.add(field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
  }
  return out;
}

async function run(argv: string[], what: string): Promise<void> {
  const r = await runCommand(argv, { timeoutMs: 30_000 });
  if (r.code !== 0) throw new Error(describeFailure(what, r));
}

/** A read-only union of several layers (lowest first), for templates with more than one layer. */
export async function mountLayers(layers: readonly string[], target: string): Promise<void> {
  const lower = [...layers].reverse().join(':');
  await run(['mount', '-t', 'overlay', '-o', `ro,lowerdir=${lower}`, 'aenv-layers', target], 'mount layers');
}

/** A size-capped tmpfs: the backing store of a writable layer whose size must be bounded. */
export async function mountTmpfs(target: string, sizeMB: number): Promise<void> {
  await run(['mount', '-t', 'tmpfs', '-o', `size=${sizeMB}m,mode=700`, 'aenv-upper', target], 'mount tmpfs');
}

/** Unmounts if mounted; a busy mount is detached lazily so release never blocks on it. */
export async function unmountIfMounted(target: string): Promise<void> {
  if (!(await mountPoints()).has(target)) return;
  const r = await runCommand(['umount', target], { timeoutMs: 30_000 });
  if (r.code !== 0) await run(['umount', '--lazy', target], 'umount');
}

/**
 * Unmounts everything mounted at or below `dir`, deepest first (e.g. the /proc, /sys and /dev a
 * killed chroot builder left in its target), so the directory can be removed without reaching
 * into another filesystem. Throws when something stays mounted.
 */
export async function unmountBelow(dir: string): Promise<void> {
  const below = (m: string) => m === dir || m.startsWith(`${dir}/`);
  const mounted = [...(await mountPoints())].filter(below).sort((a, b) => b.length - a.length);
  for (const m of mounted) await unmountIfMounted(m);
  const left = [...(await mountPoints())].filter(below);
  if (left.length) throw new Error(`still mounted below ${dir}: ${left.join(', ')}`);
}
