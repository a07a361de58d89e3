import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { Sandbox, Volume } from 'e2b';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { startServer, TEST_HOME, useTestServer } from '@agentenv/test-support/server';

/**
 * A volume's quota holds for what sandboxes write through their mounts, not only for the content
 * API: each volume is a filesystem image of its quota, loop-mounted on the node, mounted while
 * the node runs and gone with the volume.
 */
const QUOTA_MB = 16;
const ENV = { AENV_VOLUME_QUOTA_MB: String(QUOTA_MB) };
const ctx = useTestServer(ENV);
const run = Date.now().toString(36);
const created: string[] = [];

afterAll(async () => {
  for (const id of created) await Volume.destroy(id).catch(() => undefined);
});

const volumeDir = (id: string) => path.join(TEST_HOME, 'volumes', id);

/** Whether a filesystem is mounted at the volume's data directory (the node's view). */
function mounted(id: string): boolean {
  return readFileSync('/proc/self/mountinfo', 'utf8').includes(path.join(volumeDir(id), 'data'));
}

/** Loop devices whose backing file is the volume's image (deleted or not). */
function loopDevicesOf(id: string): string[] {
  return readdirSync('/sys/block')
    .filter((d) => d.startsWith('loop'))
    .filter((d) => {
      try {
        return readFileSync(`/sys/block/${d}/loop/backing_file`, 'utf8').includes(id);
      } catch {
        return false;
      }
    });
}

const newVolume = async (name: string) => {
  const v = await Volume.create(`${name}-${run}`);
  created.push(v.volumeId);
  return v;
};

describe.skipIf(process.getuid?.() !== 0)('a volume written past its quota by a sandbox', () => {
  it('gives ENOSPC inside the sandbox, spares the node disk, and leaves no mount or loop device once deleted', async () => {
    const vol = await newVolume('full');
    expect(mounted(vol.volumeId)).toBe(true);
    const sbx = await Sandbox.create({ volumeMounts: { '/vol': vol }, timeoutMs: 300_000 });
    try {
      const dd = await sbx.commands.run(
        `dd if=/dev/zero of=/vol/big bs=1M count=${QUOTA_MB * 4} 2>&1 || true`,
      );
      expect(dd.stdout).toContain('No space left on device');
      // What the sandbox wrote is in the image, which holds at most the quota on the node's disk.
      const image = statSync(path.join(volumeDir(vol.volumeId), 'volume.img'));
      expect(image.blocks * 512).toBeLessThanOrEqual(QUOTA_MB * 1024 * 1024);

      // The content API still serves the full volume, refuses to grow it, and frees it.
      expect((await vol.list('/')).map((e) => e.name)).toContain('big');
      await expect(vol.writeFile('/more', new Uint8Array(1024 * 1024))).rejects.toThrow(/quota/);
      await vol.remove('/big');
      await vol.writeFile('/after', 'fits again');
      expect((await sbx.commands.run('cat /vol/after')).stdout).toBe('fits again');
    } finally {
      await sbx.kill();
    }

    expect(loopDevicesOf(vol.volumeId)).toHaveLength(1);
    expect(await Volume.destroy(vol.volumeId)).toBe(true);
    expect(mounted(vol.volumeId)).toBe(false);
    // The loop device goes once the last user of the image (the killed sandbox's gofer) has.
    await eventually(() => expect(loopDevicesOf(vol.volumeId)).toEqual([]), { timeoutMs: 30_000 });
  }, 300_000);

  it('is unmounted when the node stops and mounted again, with its files, when it starts', async () => {
    const vol = await newVolume('kept');
    await vol.writeFile('/kept.txt', 'across a restart');
    expect(mounted(vol.volumeId)).toBe(true);

    await ctx.server.stop();
    expect(mounted(vol.volumeId)).toBe(false);
    await eventually(() => expect(loopDevicesOf(vol.volumeId)).toEqual([]), { timeoutMs: 30_000 });

    ctx.server = await startServer(ENV);
    expect(mounted(vol.volumeId)).toBe(true);
    expect(await vol.readFile('/kept.txt')).toBe('across a restart');
    const sbx = await Sandbox.create({ volumeMounts: { '/vol': vol } });
    try {
      expect((await sbx.commands.run('cat /vol/kept.txt')).stdout).toBe('across a restart');
    } finally {
      await sbx.kill();
    }
  }, 300_000);
});
