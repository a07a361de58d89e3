/**
 * The path /sandboxes-cold will take: pull an image, start a gVisor sandbox whose root is the
 * image's layers (composed by overlayfs, whiteouts applied), envd as init from the read-only tools
 * mount, and run commands in it. Skipped when runsc is unavailable.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENVD_PORT } from '@agentenv/protocol';
import { envdInitArgs, loadToolsBundle, TOOLS_SANDBOX_PATH } from '../../src/envd/index.js';
import { envRecord, ImageStore } from '../../src/image/index.js';
import { ensureSandboxLayer } from '../../src/templates/index.js';
import type { SandboxHandle } from '../../src/runtime/driver.js';
import { GvisorDriver } from '../../src/runtime/gvisor/driver.js';
import {
  EnvdClient,
  httpCall,
  ensureToolsBundle,
  mountsMentioning,
  TOOLS_DIR,
  createTestNet,
  destroyAllTestNets,
} from '@agentenv/test-support/runtime';
import {
  baseLayer,
  imageBlobs,
  ociImage,
  skopeoPush,
  tarOf,
  topLayer,
  whiteoutLayer,
  writeLayout,
  startRegistry,
  type TestRegistry,
} from '@agentenv/test-support/oci';

const RUNTIME_DIR = `/run/aenv-test/${process.pid}-oci`;
const probe = await new GvisorDriver({ runtimeDir: RUNTIME_DIR }).probe();
if (!probe.available) console.warn(`[oci sandbox] SKIPPED: ${probe.reason}`);

describe.skipIf(!probe.available)('a sandbox from a pulled image', () => {
  const driver = new GvisorDriver({ runtimeDir: RUNTIME_DIR });
  let reg: TestRegistry;
  let work: string;
  const handles: SandboxHandle[] = [];

  beforeAll(async () => {
    ensureToolsBundle();
    work = await mkdtemp(join(tmpdir(), 'aenv-oci-sandbox-'));
    reg = await startRegistry();
    // envd's test client runs `/bin/bash -c`; busybox has no bash applet, so a shim stands in.
    const shim = await tarOf([
      { name: 'bin/bash', content: '#!/bin/sh\nexec /bin/sh "$@"\n', mode: 0o755 },
      { name: 'root/', type: 'directory', mode: 0o700 },
    ]);
    const img = ociImage([await baseLayer(), await whiteoutLayer(), await topLayer(), shim], {
      env: ['PATH=/usr/bin:/bin', 'GREETING=hi'],
      workingDir: '/home/user',
    });
    await writeLayout(join(work, 'layout'), [{ tag: 'img', top: img.manifest, blobs: imageBlobs(img) }]);
    await skopeoPush(join(work, 'layout'), 'img', `${reg.host}/test/sandbox:1`);
  });

  afterAll(async () => {
    for (const h of handles) await driver.kill(h).catch(() => undefined);
    await driver.close().catch(() => undefined);
    destroyAllTestNets();
    await reg?.stop();
    if (work) await rm(work, { recursive: true, force: true });
    await rm(RUNTIME_DIR, { recursive: true, force: true }).catch(() => undefined);
  });

  it('boots with envd and sees the composed image', async () => {
    const home = join(work, 'home');
    const store = new ImageStore({ home });
    const image = await store.pull(`${reg.host}/test/sandbox:1`, { pinAs: 'sandbox-test' });
    // envd's tools bundle: copied into the node's LayerStore as the template code does
    const tools = await loadToolsBundle(TOOLS_DIR);
    // mount points and resolver files on top of the image (runsc cannot start without /proc etc.)
    const glue = await ensureSandboxLayer(store.layers, { hostname: 'oci-test' });
    const h = await driver.start({
      layers: [...image.layers, glue],
      mounts: [{ hostPath: tools.dir, sandboxPath: TOOLS_SANDBOX_PATH }],
      init: { args: envdInitArgs(tools, ENVD_PORT) },
      resources: { cpuCount: 1, memoryMB: 512, diskSizeMB: 512 },
      net: createTestNet(),
      envdPort: ENVD_PORT,
    });
    handles.push(h);
    const envd = new EnvdClient(h.net!.hostAddress, h.envdPort);
    // the image's Env and WorkingDir reach commands through envd's /init, as E2B's envVars do
    const init = await httpCall(
      h.net!.hostAddress,
      h.envdPort,
      'POST',
      '/init',
      { 'content-type': 'application/json' },
      Buffer.from(
        JSON.stringify({ envVars: envRecord(image.config.env), defaultWorkdir: image.config.workingDir }),
      ),
    );
    expect(init.status).toBeLessThan(300);
    const r = await envd.run(
      'cat /etc/hello /data/old/new.txt; ls /opq; ls /etc; test -e /etc/removed.txt || echo removed-ok; echo $GREETING; pwd',
    );
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe(
      'hello from layer 2\nrecreated after the whiteout\nupper.txt\n' +
        'group\nhello\nhostname\nhosts\npasswd\nresolv.conf\nremoved-ok\nhi\n/home/user\n',
    );
    // writes go to the sandbox's own upper layer, never to the shared image layers
    await envd.run('echo changed > /etc/hello; rm /bin/ls');
    expect((await envd.run('cat /etc/hello')).stdout).toBe('changed\n');
    const { readFile, lstat } = await import('node:fs/promises');
    expect(await readFile(join(image.layers[1]!, 'etc/hello'), 'utf8')).toBe('hello from layer 2\n');
    expect((await lstat(join(image.layers[0]!, 'bin/ls'))).isSymbolicLink()).toBe(true);
    await driver.kill(h);
    await driver.released(h.id);
    expect(mountsMentioning(h.id)).toEqual([]);
  });
});
