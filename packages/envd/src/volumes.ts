import { mkdirSync } from 'node:fs';
import { constants } from 'node:os';
import path from 'node:path';
import { VOLUMES_SANDBOX_PATH, type EnvdVolumeMount } from '@agentenv/protocol';
import { EnvdError, invalidArgument } from './errors.js';
import { loadAddon } from './native.js';

type Addon = { bindMount(source: string, target: string): number };

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

/** Throws invalid_argument unless `mounts` is a list of volume names and absolute paths. */
export function checkVolumeMounts(mounts: unknown): EnvdVolumeMount[] {
  if (mounts === undefined) return [];
  if (!Array.isArray(mounts)) throw invalidArgument('volumeMounts must be a list');
  return mounts.map((m: Partial<EnvdVolumeMount>) => {
    if (typeof m?.name !== 'string' || !NAME.test(m.name))
      throw invalidArgument(`bad volume name ${JSON.stringify(m?.name)}`);
    const p = m.path;
    if (typeof p !== 'string' || !p.startsWith('/') || p.includes('\0') || p.split('/').includes('..'))
      throw invalidArgument(`bad volume path ${JSON.stringify(p)}`);
    return { name: m.name, path: path.posix.normalize(p) };
  });
}

/**
 * The sandbox's volumes at their paths. The node binds each volume it was given beneath
 * VOLUMES_SANDBOX_PATH (one directory per name, on the host); envd binds that directory at the
 * paths the create asked for, read-write. A capture carries these binds, so a resume or a fork
 * child has them without asking again; a path already bound to the same volume is left be.
 */
export class VolumeBinds {
  private readonly bound = new Map<string, string>();

  constructor(
    private readonly addon: Addon | null = loadAddon<Addon>('bind-mount'),
    private readonly root: string = VOLUMES_SANDBOX_PATH,
  ) {}

  bind(mounts: readonly EnvdVolumeMount[]): void {
    for (const m of mounts) {
      if (this.bound.get(m.path) === m.name) continue;
      if (!this.addon)
        throw new EnvdError('internal', 'volumes cannot be mounted: envd has no bind-mount addon');
      mkdirSync(m.path, { recursive: true });
      const r = this.addon.bindMount(path.join(this.root, m.name), m.path);
      if (r !== 0)
        throw new EnvdError(
          'internal',
          `volume ${m.name} could not be mounted at ${m.path}: ${errnoName(-r)}`,
        );
      this.bound.set(m.path, m.name);
    }
  }
}

function errnoName(errno: number): string {
  const found = Object.entries(constants.errno).find(([, n]) => n === errno);
  return found?.[0] ?? `errno ${errno}`;
}
