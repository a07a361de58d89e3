import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { VOLUMES_SANDBOX_PATH } from '@agentenv/protocol';
import type { CaptureMeta, SandboxVolume } from '../driver.js';
import { InvalidRequestError } from '../errors.js';
import { describeFailure, runCommand } from './runsc.js';
import { unmountBelow } from './mounts.js';

/** The bundle's directory runsc shows at VOLUMES_SANDBOX_PATH: one bind per volume beneath it. */
const VOLUMES_DIR = 'volumes';
const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

export const volumesDir = (bundleDir: string): string => join(bundleDir, VOLUMES_DIR);

/**
 * The mount every sandbox gets, so that every capture carries it: gVisor restores a capture's
 * mounts by destination and takes their sources from the restore's spec, so a restore chooses
 * which volumes lie beneath it. The directory is root's only (0700), inside too.
 */
export function volumesMount(bundleDir: string) {
  return {
    destination: VOLUMES_SANDBOX_PATH,
    type: 'bind',
    source: volumesDir(bundleDir),
    options: ['rbind', 'rw', 'nosuid', 'nodev'],
  };
}

/**
 * The volumes a restore binds: the capture's (its sandbox's binds of them are in its memory, and
 * gVisor fails a restore whose files are gone), with the requested ones added; a requested name
 * replaces the captured one.
 */
export function restoreVolumes(meta: CaptureMeta, requested: readonly SandboxVolume[]): SandboxVolume[] {
  if (!meta.volumes && requested.length)
    throw new InvalidRequestError(
      'this capture was taken without a volume mount point, so no volume can be mounted into it (rebuild the template)',
    );
  const names = new Set(requested.map((v) => v.name));
  return [...(meta.volumes ?? []).filter((v) => !names.has(v.name)), ...requested];
}

/** Throws InvalidRequestError unless each volume has a name of its own and a host directory. */
export async function checkVolumes(volumes: readonly SandboxVolume[]): Promise<void> {
  const seen = new Set<string>();
  for (const v of volumes) {
    if (!NAME.test(v.name)) throw new InvalidRequestError(`bad volume name ${JSON.stringify(v.name)}`);
    if (seen.has(v.name)) throw new InvalidRequestError(`volume ${v.name} given twice`);
    seen.add(v.name);
    const st = await stat(v.hostPath).catch(() => null);
    if (!st?.isDirectory())
      throw new InvalidRequestError(`volume ${v.name}: ${v.hostPath} is not a directory`);
  }
}

/**
 * Makes the bundle's volume directory and binds each volume's host directory beneath it, before
 * runsc starts (its gofer takes the tree as it is then). Only these volumes are there: a
 * sandbox reaches no other through its mount point.
 */
export async function bindVolumes(bundleDir: string, volumes: readonly SandboxVolume[]): Promise<void> {
  const dir = volumesDir(bundleDir);
  await mkdir(dir, { mode: 0o700 });
  for (const v of volumes) {
    const target = join(dir, v.name);
    await mkdir(target);
    const r = await runCommand(['mount', '--bind', v.hostPath, target], { timeoutMs: 30_000 });
    if (r.code !== 0) throw new Error(describeFailure(`binding volume ${v.name}`, r));
  }
}

/** Unbinds every volume of the bundle; throws when one stays bound (the bundle must then stay). */
export async function unbindVolumes(bundleDir: string): Promise<void> {
  await unmountBelow(volumesDir(bundleDir));
}
