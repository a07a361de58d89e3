import { statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { runProcess } from '../util/index.js';

/**
 * A volume as an ext4 filesystem image of its quota size, loop-mounted on the node: what
 * sandboxes write through their mounts fills the image (ENOSPC inside the sandbox), never the
 * node's disk. The image file is sparse, so the disk holds only what was written.
 *
 * `mmp` (multi-mount protection) makes a second node that shares the volume root refuse to
 * mount an image another node has mounted, instead of corrupting it. Mounted nosuid,nodev: a
 * file a sandbox planted never runs on the host as setuid or opens a device.
 */
const MOUNT_OPTIONS = 'loop,nosuid,nodev';

async function run(file: string, args: readonly string[]): Promise<void> {
  const r = await runProcess(file, args, { timeoutMs: 120_000 });
  if (r.code !== 0)
    throw new Error(`${file} ${args.join(' ')} failed: ${(r.stderr || r.stdout).trim() || `exit ${r.code}`}`);
}

/** A new image of `bytes` whose root directory `owner` owns. */
export async function makeImage(
  file: string,
  bytes: number,
  owner: { uid: number; gid: number },
): Promise<void> {
  const fh = await open(file, 'wx', 0o600);
  try {
    await fh.truncate(bytes);
  } finally {
    await fh.close();
  }
  const rootOwner = `root_owner=${owner.uid}:${owner.gid}`;
  await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-O', 'mmp', '-E', rootOwner, file]);
}

/** Mounts `file` at `dir`; a loop device already backed by it is reused (mount(8) does so). */
export async function mountImage(file: string, dir: string): Promise<void> {
  await run('mount', ['-o', MOUNT_OPTIONS, file, dir]);
}

/**
 * Detaches the image mounted at `dir` at once; sandboxes still using it keep it until they
 * stop, and its loop device (autoclear) goes with the last of them.
 */
export async function unmountImage(dir: string): Promise<void> {
  await run('umount', ['--lazy', dir]);
}

/** Whether a filesystem is mounted at `dir` (it is on another device than its parent). */
export function isMountPoint(dir: string): boolean {
  try {
    return statSync(dir).dev !== statSync(path.dirname(dir)).dev;
  } catch {
    return false;
  }
}
