/**
 * The path /sandboxes-cold will take: pull an image (@agentenv/oci), compose its layers with the
 * runtime's overlay mount (whiteouts applied), start a gVisor sandbox on them with envd as init
 * from the read-only tools mount, and run commands in it. The sandbox is skipped when runsc is
 * unavailable.
 */
import { execFile } from 'node:child_process';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENVD_PORT } from '@agentenv/protocol';
import { envdInitArgs, loadToolsBundle, TOOLS_SANDBOX_PATH } from '../../src/envd/index.js';
import { envRecord, ImageStore } from '@agentenv/oci';
import { ensureSandboxLayer } from '../../src/templates/index.js';
import type { SandboxHandle } from '../../src/runtime/driver.js';
import { GvisorDriver } from '../../src/runtime/gvisor/driver.js';
import { mountLayers, unmountIfMounted } from '../../src/runtime/gvisor/mounts.js';
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

const run = promisify(execFile);
const RUNTIME_DIR = `/run/aenv-test/${process.pid}-oci`;
const probe = await new GvisorDriver({ runtimeDir: RUNTIME_DIR }).probe();
if (!probe.available) console.warn(`[oci sandbox] SKIPPED: ${probe.reason}`);

let reg: TestRegistry;
let work: string;

beforeAll(async () => {
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
  await reg?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("the layers of a pulled image under the runtime's overlay mount", () => {
  it('composes the layers with mountLayers: deletions, opaque dir, re-created paths, links', async () => {
    const img = await new ImageStore({ home: join(work, 'home-mount') }).pull(`${reg.host}/test/sandbox:1`);
    const mnt = join(work, 'mnt-compose');
    await mkdir(mnt, { recursive: true });
    await mountLayers(img.layers, mnt);
    try {
      const ls = async (p: string) => (await readdir(join(mnt, p))).sort();
      expect(await readFile(join(mnt, 'etc/hello'), 'utf8')).toBe('hello from layer 2\n');
      expect(await ls('etc')).toEqual(['group', 'hello', 'passwd']);
      expect(await ls('data')).toEqual(['kept.txt', 'old']);
      expect(await ls('data/old')).toEqual(['new.txt']);
      expect(await ls('opq')).toEqual(['upper.txt']);
      const tool = await lstat(join(mnt, 'usr/bin/tool'));
      expect(tool.mode & 0o7777).toBe(0o4755);
      expect(tool.nlink).toBe(2);
      expect((await lstat(join(mnt, 'usr/bin/tool-link'))).ino).toBe(tool.ino);
      const { stdout: xattr } = await run('getfattr', [
        '--absolute-names',
        '-n',
        'user.test',
        join(mnt, 'usr/bin/cap'),
      ]);
      expect(xattr).toContain('user.test="value-1"');
      // the composed root runs: busybox from layer 1 reads files from layers 2 and 3
      const { stdout } = await run('chroot', [
        mnt,
        '/bin/sh',
        '-c',
        'cat /etc/hello /data/old/new.txt; ls /opq',
      ]);
      expect(stdout).toBe('hello from layer 2\nrecreated after the whiteout\nupper.txt\n');
    } finally {
      await unmountIfMounted(mnt);
    }
  });
});

describe.skipIf(!probe.available)('a sandbox from a pulled image', () => {
  const driver = new GvisorDriver({ runtimeDir: RUNTIME_DIR });
  const handles: SandboxHandle[] = [];

  beforeAll(() => ensureToolsBundle());

  afterAll(async () => {
    for (const h of handles) await driver.kill(h).catch(() => undefined);
    await driver.close().catch(() => undefined);
    destroyAllTestNets();
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
    expect(await readFile(join(image.layers[1]!, 'etc/hello'), 'utf8')).toBe('hello from layer 2\n');
    expect((await lstat(join(image.layers[0]!, 'bin/ls'))).isSymbolicLink()).toBe(true);
    await driver.kill(h);
    await driver.released(h.id);
    expect(mountsMentioning(h.id)).toEqual([]);
  });
});
