import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resources, SandboxHandle } from '../../src/runtime/driver.js';
import { GvisorDriver } from '../../src/runtime/gvisor/driver.js';
import type { Template } from '../../src/templates/index.js';
import {
  createRepository,
  RuntimeCache,
  SnapshotStore,
  Workspace,
  type Repository,
} from '@agentenv/snapshot';
import {
  EnvdClient,
  baseTemplate,
  TEST_HOME,
  createTestNet,
  destroyAllTestNets,
  type TestNet,
} from '@agentenv/test-support/runtime';
import { duBytes } from '@agentenv/test-support/snapshot';

/**
 * The acceptance test of incremental storage with a real sandbox: after a 1 MiB change in a
 * sandbox holding a 200 MiB file, the second capture grows the repository by less than 10 % of
 * what the first one wrote; the second snapshot is rebuilt from the repository through the
 * runtime cache and restored, and the file is intact.
 */
const RUNTIME_DIR = `/run/aenv-test/${process.pid}-snapshot`;
const probe = await new GvisorDriver({ runtimeDir: RUNTIME_DIR }).probe();
if (!probe.available) console.warn(`[snapshot/gvisor] SKIPPED: ${probe.reason}`);

describe.skipIf(!probe.available)('snapshot store with a real gVisor sandbox', () => {
  const driver = new GvisorDriver({ runtimeDir: RUNTIME_DIR });
  const scratch = join(TEST_HOME, 'scratch', `${process.pid}-snapshot`);
  const resources: Resources = { cpuCount: 1, memoryMB: 1024, diskSizeMB: 1024 };
  const handles: SandboxHandle[] = [];
  let template: Template;
  let repo: Repository;

  const start = async (net: TestNet, capture?: string): Promise<SandboxHandle> => {
    const h = capture
      ? await driver.restore({ capture, resources, net })
      : await driver.start({
          layers: template.layers,
          mounts: template.mounts,
          init: template.init,
          resources,
          net,
          envdPort: template.envdPort,
        });
    handles.push(h);
    return h;
  };

  beforeAll(async () => {
    template = await baseTemplate(driver);
    await mkdir(scratch, { recursive: true });
    repo = createRepository({ backend: 'posix_fs', path: join(scratch, 'repo') });
    await repo.open();
  });

  afterAll(async () => {
    for (const h of handles) await driver.kill(h).catch(() => undefined);
    await driver.close().catch(() => undefined);
    await repo?.close();
    destroyAllTestNets();
    await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
    await rm(RUNTIME_DIR, { recursive: true, force: true }).catch(() => undefined);
  });

  it('stores the second capture as a small delta and restores it intact', async () => {
    const store = new SnapshotStore({ repository: repo });
    const ws = new Workspace(join(scratch, 'workspace'));
    await ws.open();
    const cache = new RuntimeCache({ dir: join(scratch, 'cache'), capacityBytes: 2 * 1024 ** 3, store });
    await cache.open();

    const h = await start(createTestNet());
    const envd = new EnvdClient(h.net!.hostAddress, h.envdPort);
    const w = await envd.run('head -c 200M /dev/urandom > /tmp/big && sync && stat -c %s /tmp/big');
    expect(w.stdout.trim()).toBe(String(200 * 1024 * 1024));

    const capture = (parent?: string) =>
      ws.use(async (dir) => {
        const t0 = Date.now();
        await driver.checkpoint(h, { dir, leaveRunning: true });
        const t1 = Date.now();
        const s = await store.storeCapture(dir, {
          labels: { sandboxId: h.id },
          ...(parent ? { parent } : {}),
        });
        console.log(
          `[snapshot/gvisor] capture ${parent ? 'after 1 MiB change' : 'first'}: ${s.bytesTotal} bytes in ` +
            `${s.manifest.files.map((f) => `${f.name}=${f.bytes}`).join(' ')}; wrote ${s.bytesWritten} bytes ` +
            `(${s.chunksWritten}/${s.chunksTotal} chunks); checkpoint ${t1 - t0} ms, store ${Date.now() - t1} ms`,
        );
        return s;
      });

    const s1 = await capture();
    const grown1 = await duBytes(join(scratch, 'repo', 'blobs'));
    expect(grown1).toBe(s1.bytesWritten);
    expect(s1.bytesTotal).toBeGreaterThan(200 * 1024 * 1024);

    await envd.run('dd if=/dev/urandom of=/tmp/big bs=1M count=1 seek=100 conv=notrunc 2>/dev/null');
    const sum = (await envd.run('sha256sum /tmp/big')).stdout.split(' ')[0];
    expect(sum).toMatch(/^[0-9a-f]{64}$/);

    const s2 = await capture(s1.snapshotId);
    const grown2 = (await duBytes(join(scratch, 'repo', 'blobs'))) - grown1;
    console.log(
      `[snapshot/gvisor] repository growth: first ${grown1} bytes, second ${grown2} bytes (${((100 * grown2) / grown1).toFixed(2)} %)`,
    );
    expect(grown2).toBe(s2.bytesWritten);
    expect(grown2).toBeLessThan(0.1 * grown1);
    await driver.kill(h);

    // Rebuilt from the repository (not the workspace, which is gone), verified chunk by chunk.
    const t0 = Date.now();
    const held = await cache.acquire(s2.snapshotId);
    console.log(`[snapshot/gvisor] materialize ${s2.bytesTotal} bytes: ${Date.now() - t0} ms`);
    try {
      const r = await start(createTestNet(), held.capture.dir);
      const renvd = new EnvdClient(r.net!.hostAddress, r.envdPort);
      expect((await renvd.run('sha256sum /tmp/big')).stdout.split(' ')[0]).toBe(sum);
      await driver.kill(r);
    } finally {
      held.release();
    }
  });
});
