import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LayerStore } from '../../src/layer-store.js';

/** Above the kernel's largest pid_max (2^22): never a running process. */
const DEAD_PID = 2 ** 22 + 1;

describe('LayerStore', () => {
  let root = '';
  afterEach(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('commits a layer atomically and never keeps a failed one', async () => {
    root = await mkdtemp(join(tmpdir(), 'layers-'));
    const store = new LayerStore(root);
    await expect(
      store.ensure('bad', {}, async (dir) => {
        await writeFile(join(dir, 'half'), 'x');
        throw new Error('boom');
      }),
    ).rejects.toThrow(/boom/);
    expect(await readdir(root)).toEqual([]);
    let builds = 0;
    const fill = async (dir: string) => {
      builds++;
      await writeFile(join(dir, 'f'), 'ok');
    };
    const p = await store.ensure('good', { v: 1 }, fill);
    expect((await stat(join(p, 'f'))).isFile()).toBe(true);
    await store.ensure('good', { v: 1 }, fill);
    expect(builds).toBe(1);
    expect((await store.meta('good')).source).toEqual({ v: 1 });
  });

  it("hands a build directory to unmountBelow before removing it: a failed build's, a dead builder's", async () => {
    root = await mkdtemp(join(tmpdir(), 'layers-'));
    const unmounted: string[] = [];
    const store = new LayerStore(root, { unmountBelow: async (dir) => void unmounted.push(dir) });
    await expect(store.ensure('bad', {}, () => Promise.reject(new Error('boom')))).rejects.toThrow(/boom/);
    expect(unmounted).toEqual([expect.stringMatching(new RegExp(`^${root}/\\.tmp-bad-${process.pid}-`))]);

    const left = join(root, `.tmp-base-${DEAD_PID}-0badf00d`);
    await mkdir(join(left, 'rootfs'), { recursive: true });
    await store.sweep();
    expect(unmounted.at(-1)).toBe(left);
    expect(await readdir(root)).toEqual([]);
  });

  it('keeps a build directory that something stays mounted in', async () => {
    root = await mkdtemp(join(tmpdir(), 'layers-'));
    const store = new LayerStore(root, {
      unmountBelow: (dir) => Promise.reject(new Error(`still mounted below ${dir}: ${dir}/rootfs/proc`)),
    });
    const left = join(root, `.tmp-base-${DEAD_PID}-0badf00d`);
    await mkdir(join(left, 'rootfs', 'proc'), { recursive: true });
    await expect(store.sweep()).rejects.toThrow(/still mounted below/);
    expect(await readdir(join(left, 'rootfs'))).toEqual(['proc']);
  });
});
