import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resources, SandboxHandle } from '../../src/runtime/driver.js';
import { GvisorDriver } from '../../src/runtime/gvisor/driver.js';
import type { Template } from '../../src/templates/index.js';
import {
  EnvdClient,
  baseTemplate,
  mountsMentioning,
  processesMentioning,
  runscIds,
  TEST_HOME,
  createTestNet,
  destroyAllTestNets,
  type TestNet,
} from '@agentenv/test-support/runtime';

/**
 * gVisor-specific lifecycle: background release after kill and checkpoint, a node that dies in
 * the middle of one (the next start's sweep reclaims it), captures under either compression,
 * CPU placement, and the driver without its reaper.
 */
const RUNTIME_DIR = `/run/aenv-test/${process.pid}-lifecycle`;
const probe = await new GvisorDriver({ runtimeDir: RUNTIME_DIR }).probe();
if (!probe.available) console.warn(`[gvisor-lifecycle] SKIPPED: ${probe.reason}`);

const SMALL: Resources = { cpuCount: 1, memoryMB: 512, diskSizeMB: 512 };
const CGROUP_CONTROLLERS = ['memory', 'cpu', 'cpuset', 'freezer', 'pids'];

describe.skipIf(!probe.available)('gvisor: release, compression, placement', () => {
  const drivers: GvisorDriver[] = [];
  const handles: { driver: GvisorDriver; h: SandboxHandle }[] = [];
  const scratch = join(TEST_HOME, 'scratch', `${process.pid}-lifecycle`);
  let template: Template;
  let n = 0;

  const driverWith = (opts: ConstructorParameters<typeof GvisorDriver>[0] = {}) => {
    const d = new GvisorDriver({
      runtimeDir: `${RUNTIME_DIR}/${n++}`,
      cgroupParent: `aenv-test-${process.pid}`,
      ...opts,
    });
    drivers.push(d);
    return d;
  };
  const restore = async (driver: GvisorDriver, capture: string, net: TestNet = createTestNet()) => {
    const h = await driver.restore({ capture, resources: SMALL, net });
    handles.push({ driver, h });
    return h;
  };
  const client = (h: SandboxHandle) => new EnvdClient(h.net!.hostAddress, h.envdPort);
  /** Nothing of the sandbox on the host: processes, runsc state, bundle, mounts, cgroups. */
  const nothingLeft = async (driver: GvisorDriver, dir: string, id: string) => {
    expect(processesMentioning(id)).toEqual([]);
    expect(runscIds(join(dir, 'runsc'))).not.toContain(id);
    expect(existsSync(join(dir, 'sandboxes', id))).toBe(false);
    expect(mountsMentioning(id)).toEqual([]);
    for (const c of CGROUP_CONTROLLERS) {
      await expect(stat(`/sys/fs/cgroup/${c}/aenv-test-${process.pid}/${id}`)).rejects.toThrow();
    }
    expect(driver.releasing().map((r) => r.id)).not.toContain(id);
  };

  beforeAll(async () => {
    template = await baseTemplate(driverWith());
  });

  afterAll(async () => {
    for (const { driver, h } of handles) await driver.kill(h).catch(() => undefined);
    for (const d of drivers) await d.close().catch(() => undefined);
    destroyAllTestNets();
    await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
    await rm(RUNTIME_DIR, { recursive: true, force: true }).catch(() => undefined);
  });

  it('kill and a stopping checkpoint return with the sandbox stopped, and release everything after', async () => {
    const driver = driverWith();
    const dir = `${RUNTIME_DIR}/${n - 1}`;
    const a = await restore(driver, template.capture.dir);
    const b = await restore(driver, template.capture.dir);
    await driver.kill(a);
    expect(await driver.status(a)).toBe('stopped');
    await expect(client(a).health(500)).rejects.toThrow();
    const cap = await driver.checkpoint(b, { dir: join(scratch, 'stop'), leaveRunning: false });
    expect(await driver.status(b)).toBe('stopped');
    await Promise.all([driver.released(a.id), driver.released(b.id)]);
    await nothingLeft(driver, dir, a.id);
    await nothingLeft(driver, dir, b.id);
    // The capture is complete: it restores.
    const c = await restore(driver, cap.dir);
    expect(await client(c).health()).toBe(204);
  });

  it('a node killed during a background release leaves nothing its next start does not reclaim', async () => {
    const dir = `${RUNTIME_DIR}/crash`;
    const net = createTestNet();
    const boot = {
      layers: template.layers,
      mounts: template.mounts,
      init: template.init,
      resources: SMALL,
      net: { netnsPath: net.netnsPath, hostAddress: net.hostAddress },
      envdPort: template.envdPort,
    };
    const child = spawnSync(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./crash-during-release.ts', import.meta.url))],
      {
        env: { ...process.env, AENV_CRASH_RUNTIME_DIR: dir, AENV_CRASH_BOOT: JSON.stringify(boot) },
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(child.signal, child.stderr).toBe('SIGKILL');
    const id = child.stdout.trim();
    expect(id).toMatch(/^aenv-[0-9a-f]{20}$/);
    // The release was cut short: its bundle (with the writable layer's tmpfs) is still there.
    expect(existsSync(join(dir, 'sandboxes', id))).toBe(true);
    expect(mountsMentioning(id).length).toBeGreaterThan(0);
    const next = new GvisorDriver({ runtimeDir: dir, upper: 'tmpfs' });
    drivers.push(next);
    await next.prepare();
    expect(mountsMentioning(id)).toEqual([]);
    expect(existsSync(join(dir, 'sandboxes', id))).toBe(false);
    expect(runscIds(join(dir, 'runsc'))).not.toContain(id);
    expect(processesMentioning(id)).toEqual([]);
    for (const c of CGROUP_CONTROLLERS)
      await expect(stat(`/sys/fs/cgroup/${c}/aenv/${id}`)).rejects.toThrow();
    net.destroy();
  });

  it('captures round-trip under either compression, read by a driver with the other setting', async () => {
    const flate = driverWith({ compression: 'flate' });
    const none = driverWith({ compression: 'none' });
    const src = await restore(none, template.capture.dir);
    await client(src).run('echo kept > /root/mark');
    const plain = await none.checkpoint(src, { dir: join(scratch, 'plain'), leaveRunning: true });
    const src2 = await restore(flate, plain.dir);
    const packed = await flate.checkpoint(src2, { dir: join(scratch, 'packed'), leaveRunning: true });
    expect(plain.meta.settings.compression).toBe('none');
    expect(packed.meta.settings.compression).toBe('flate');
    const size = (files: readonly { bytes: number }[]) => files.reduce((s, f) => s + f.bytes, 0);
    expect(size(packed.meta.files)).toBeLessThan(size(plain.meta.files));
    for (const [driver, cap] of [
      [none, packed],
      [flate, plain],
    ] as const) {
      const h = await restore(driver, cap.dir);
      expect((await client(h).run('cat /root/mark')).stdout).toBe('kept\n');
      await driver.kill(h);
    }
  });

  it('spreads 1-CPU sandboxes over the host CPUs through their cpusets', async () => {
    const cpus = (await readFile('/sys/devices/system/cpu/online', 'utf8')).trim();
    const driver = driverWith({ cpuPlacement: 'spread' });
    const hs = [await restore(driver, template.capture.dir), await restore(driver, template.capture.dir)];
    const sets = await Promise.all(
      hs.map(async (h) =>
        (await readFile(`/sys/fs/cgroup/cpuset/aenv-test-${process.pid}/${h.id}/cpuset.cpus`, 'utf8')).trim(),
      ),
    );
    if (cpus === '0') {
      expect(sets).toEqual(['0', '0']);
    } else {
      expect(new Set(sets).size).toBe(2);
      for (const [i, h] of hs.entries()) expect(driver.cpusOf(h)?.join(',')).toBe(sets[i]);
    }
    for (const h of hs) expect(await client(h).health()).toBe(204);
  });

  it('runs without its reaper (sandboxes then wait for init to reap them)', async () => {
    const driver = driverWith({ reaperPath: join(scratch, 'no-such-reaper') });
    const h = await restore(driver, template.capture.dir);
    expect((await client(h).run('echo ok')).stdout).toBe('ok\n');
    await driver.kill(h);
    await driver.released(h.id);
    expect(processesMentioning(h.id)).toEqual([]);
    expect(await readdir(`${RUNTIME_DIR}/${n - 1}/sandboxes`)).toEqual([]);
  });
});
