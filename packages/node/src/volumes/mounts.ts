import { invalid } from '@agentenv/common';
import { checkMountList, checkMountPath } from './rules.js';
import type { VolumeStore } from './store.js';

/** A volume resolved for a sandbox: where it appears inside and the host directory behind it. */
export interface VolumeBind {
  readonly name: string;
  readonly path: string;
  readonly hostPath: string;
}

/** A sandbox mounts at most this many volumes. */
export const MAX_VOLUME_MOUNTS = 16;

/** Turns a create's `volumeMounts` into host bind mounts; 400 for an unknown volume or bad path. */
export class VolumeMounts {
  constructor(private readonly store: VolumeStore) {}

  resolve(mounts: readonly { name: string; path: string }[]): VolumeBind[] {
    checkMountList(mounts, MAX_VOLUME_MOUNTS);
    return mounts.map((m) => {
      const v = this.store.findByName(m.name);
      if (!v) throw invalid(`volume ${m.name} not found`);
      return { name: v.name, path: checkMountPath(m.path), hostPath: this.store.dataDir(v) };
    });
  }
}
