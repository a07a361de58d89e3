import { describe, expect, it } from 'vitest';
import type { CaptureMeta } from '../../src/runtime/driver.js';
import { restoreVolumes, volumesMount } from '../../src/runtime/gvisor/volumes.js';

const meta = (volumes?: CaptureMeta['volumes']) => ({ volumes }) as CaptureMeta;

describe('volumes of a gVisor restore', () => {
  it("binds the capture's volumes with the requested ones, a requested name replacing the captured", () => {
    const captured = [
      { name: 'a', hostPath: '/v/a-old' },
      { name: 'b', hostPath: '/v/b' },
    ];
    expect(restoreVolumes(meta(captured), [{ name: 'a', hostPath: '/v/a' }])).toEqual([
      { name: 'b', hostPath: '/v/b' },
      { name: 'a', hostPath: '/v/a' },
    ]);
    expect(restoreVolumes(meta(captured), [])).toEqual(captured);
  });

  it('refuses volumes for a capture taken without the mount point, which gVisor would not show', () => {
    expect(restoreVolumes(meta(undefined), [])).toEqual([]);
    expect(() => restoreVolumes(meta(undefined), [{ name: 'a', hostPath: '/v/a' }])).toThrow(
      /without a volume mount point/,
    );
  });

  it("mounts the bundle's volume directory at the hidden path, without setuid or devices", () => {
    expect(volumesMount('/run/b/x')).toEqual({
      destination: '/.aenv-volumes',
      type: 'bind',
      source: '/run/b/x/volumes',
      options: ['rbind', 'rw', 'nosuid', 'nodev'],
    });
  });
});
