import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxHandle } from '../../src/runtime/driver.js';
import { GvisorDriver } from '../../src/runtime/gvisor/driver.js';
import type { Template } from '../../src/templates/index.js';
import {
  EnvdClient,
  baseTemplate,
  mountsMentioning,
  TEST_HOME,
  createTestNet,
  destroyAllTestNets,
} from '@agentenv/test-support/runtime';

/**
 * gVisor-specific: the size-capped writable layer (`upper: 'tmpfs'`, a filestore on a per-sandbox
 * tmpfs of diskSizeMB). Writes past the cap fail with ENOSPC instead of growing memory, and the
 * layer is still part of the checkpoint.
 */
const RUNTIME_DIR = `/run/aenv-test/${process.pid}-upper`;
const probe = await new GvisorDriver({ runtimeDir: RUNTIME_DIR }).probe();
if (!probe.available) console.warn(`[gvisor-upper] SKIPPED: ${probe.reason}`);

describe.skipIf(!probe.available)('gvisor: disk-capped writable layer', () => {
  const base = new GvisorDriver({ runtimeDir: `${RUNTIME_DIR}-base` });
  const driver = new GvisorDriver({ runtimeDir: RUNTIME_DIR, upper: 'tmpfs' });
  let template: Template;
  const scratch = join(TEST_HOME, 'scratch', `${process.pid}-upper`);
  const handles: SandboxHandle[] = [];

  beforeAll(async () => {
    template = await baseTemplate(base);
  });

  afterAll(async () => {
    for (const h of handles) await driver.kill(h).catch(() => undefined);
    await driver.close().catch(() => undefined);
    await base.close().catch(() => undefined);
    destroyAllTestNets();
    await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
    await rm(RUNTIME_DIR, { recursive: true, force: true }).catch(() => undefined);
    await rm(`${RUNTIME_DIR}-base`, { recursive: true, force: true }).catch(() => undefined);
  });

  it('caps writes at diskSizeMB and keeps the layer across checkpoint/restore', async () => {
    const resources = { cpuCount: 1, memoryMB: 512, diskSizeMB: 64 };
    const h = await driver.start({
      layers: template.layers,
      mounts: template.mounts,
      init: template.init,
      resources,
      net: createTestNet(),
      envdPort: template.envdPort,
    });
    handles.push(h);
    const envd = new EnvdClient(h.net!.hostAddress, h.envdPort);
    const big = await envd.run('dd if=/dev/zero of=/root/big bs=1M count=100 2>&1; echo kept > /root/small');
    expect(big.stdout).toMatch(/No space left on device/);
    expect((await driver.stats(h)).diskBytes).toBeGreaterThan(32 * 1024 * 1024);
    await envd.run('rm -f /root/big; echo kept > /root/small');

    const cap = await driver.checkpoint(h, { dir: join(scratch, 'cap'), leaveRunning: false });
    expect(await driver.status(h)).toBe('stopped');
    await driver.released(h.id);
    expect(mountsMentioning(h.id)).toEqual([]);
    const r = await driver.restore({ capture: cap, resources, net: createTestNet() });
    handles.push(r);
    const re = new EnvdClient(r.net!.hostAddress, r.envdPort);
    expect((await re.run('cat /root/small')).stdout).toBe('kept\n');
    await driver.kill(r);
    await driver.released(r.id);
    expect(mountsMentioning(r.id)).toEqual([]);
  });
});
