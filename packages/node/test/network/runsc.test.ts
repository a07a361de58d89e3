import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, open, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { needsProcSysNetWorkaround } from '../../src/network/environment.js';
import type { ManagedSlot } from '../../src/network/managed-slot.js';
import { NetworkManager } from '../../src/network/manager.js';
import {
  INTERNET_ADDRESS,
  createTestInternet,
  fetchFromHost,
  isRoot,
  sh,
  silentLogger,
  type TestInternet,
} from '@agentenv/test-support/network';
import { eventually } from '@agentenv/test-support';

/**
 * The topology under a real gVisor sandbox: runsc --network=sandbox takes the slot's interface,
 * serves a port the node reaches through hostAddress, reaches the (test) internet, is refused the
 * host, and a second sandbox starts in the same slot after reset().
 */

const exec = promisify(execFile);
const RUNSC_ROOT = '/run/aenv-test-runsc';
const BUSYBOX = '/bin/busybox';
// runsc matches container ids by prefix, so the ids have the same length.
const IDS = ['aenvnettest01', 'aenvnettest02'];

async function runscAvailable(): Promise<string | undefined> {
  if (!isRoot()) return 'not root';
  if (!existsSync(BUSYBOX)) return `${BUSYBOX} missing (Debian package busybox-static)`;
  try {
    await exec('runsc', ['--version']);
  } catch {
    return 'runsc is not installed (scripts/setup.sh installs it from bookworm-backports)';
  }
  return undefined;
}

const skipReason = await runscAvailable();
if (skipReason) console.log(`skipping the runsc network test: ${skipReason}`);

function runsc(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return exec('runsc', ['--root', RUNSC_ROOT, ...args], { timeout: 60_000 });
}

/**
 * `runsc run --detach`, inside the /proc/sys/net work-around when this kernel needs it. The
 * container keeps runsc's stdout/stderr for its whole life, so they go to a file: a pipe would
 * never reach end-of-file and a caller waiting for it would hang.
 */
async function startSandbox(bundle: string, id: string, workaround: boolean): Promise<void> {
  const run = ['runsc', '--root', RUNSC_ROOT, '--network=sandbox', 'run', '--detach', '--bundle', bundle, id];
  const command = workaround
    ? [
        'unshare',
        '-m',
        '--propagation',
        'private',
        'sh',
        '-c',
        'mount -t tmpfs none /proc/sys/net && exec "$@"',
        'sh',
        ...run,
      ]
    : run;
  const logPath = join(bundle, `${id}.log`);
  const log = await open(logPath, 'w');
  try {
    const child = spawn(command[0] as string, command.slice(1), { stdio: ['ignore', log.fd, log.fd] });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('exit', resolve);
    });
    if (code !== 0) throw new Error(`runsc run exited with ${code}: ${await readFile(logPath, 'utf8')}`);
  } finally {
    await log.close();
  }
}

async function removeSandbox(id: string): Promise<void> {
  await runsc(['kill', id, 'KILL']).catch(() => undefined);
  await runsc(['delete', '--force', id]).catch(() => undefined);
}

/**
 * HTTP GET from inside the sandbox with busybox nc (busybox-static's wget crashes resolving even a
 * literal address under gVisor). stdin is a pipe we close: runsc exec forwards it and changes the
 * ownership of the caller's stdio, so it must not inherit ours.
 */
async function sandboxGet(id: string, host: string, port = 80): Promise<{ ok: boolean; out: string }> {
  const script = `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | ${BUSYBOX} nc -w 2 ${host} ${port}`;
  try {
    const out = await sh('runsc', ['--root', RUNSC_ROOT, 'exec', id, BUSYBOX, 'sh', '-c', script], '');
    return { ok: true, out: out.split('\r\n\r\n')[1] ?? out };
  } catch (error) {
    return { ok: false, out: String((error as { stderr?: string }).stderr ?? error) };
  }
}

async function waitFor(url: string, body: string): Promise<void> {
  await eventually(
    async () => {
      const result = await fetchFromHost(url, 1000);
      if (!result.ok || result.body !== body)
        throw new Error(`${url} never answered ${body}: ${result.body}`);
    },
    { timeoutMs: 15_000 },
  );
}

describe.skipIf(skipReason !== undefined)('gVisor sandbox in a network slot', () => {
  let internet: TestInternet | undefined;
  let manager: NetworkManager | undefined;
  let bundle = '';

  beforeAll(async () => {
    internet = await createTestInternet();
    manager = await NetworkManager.create({
      nodeTag: 'tr',
      hostRange: '10.237.8.0/24',
      poolSize: 0,
      logger: silentLogger,
    });
    bundle = await mkdtemp(join(tmpdir(), 'aenv-net-runsc-'));
    await mkdir(join(bundle, 'rootfs', 'bin'), { recursive: true });
    await mkdir(join(bundle, 'rootfs', 'www'));
    await copyFile(BUSYBOX, join(bundle, 'rootfs', 'bin', 'busybox'));
    await writeFile(join(bundle, 'rootfs', 'www', 'index.html'), 'hello from gvisor');
    await mkdir(RUNSC_ROOT, { recursive: true });
  });

  afterAll(async () => {
    try {
      for (const id of IDS) await removeSandbox(id);
      await manager?.shutdown();
    } finally {
      await internet?.close();
      if (bundle) await rm(bundle, { recursive: true, force: true });
      // Only when empty: a container whose delete failed keeps its state (and stays findable).
      await rmdir(RUNSC_ROOT).catch(() => undefined);
    }
  });

  async function writeSpec(slot: ManagedSlot): Promise<void> {
    // runsc joins the namespace named in the spec; without a path it would create an empty one.
    await exec('runsc', [
      'spec',
      '--bundle',
      bundle,
      '--netns',
      slot.netnsPath,
      '--',
      '/bin/busybox',
      'httpd',
      '-f',
      '-p',
      '8080',
      '-h',
      '/www',
    ]);
    const spec = JSON.parse(await readFile(join(bundle, 'config.json'), 'utf8')) as {
      process: { terminal: boolean };
      root: { readonly: boolean };
    };
    spec.process.terminal = false;
    spec.root.readonly = true;
    await writeFile(join(bundle, 'config.json'), JSON.stringify(spec));
  }

  it('serves, reaches the internet, is refused the host, and restarts in the same slot after reset()', async () => {
    const m = manager as NetworkManager;
    const workaround = await needsProcSysNetWorkaround();
    console.log(`runsc /proc/sys/net work-around needed on this kernel: ${workaround}`);
    const slot = await m.acquire();
    await writeSpec(slot);

    await startSandbox(bundle, IDS[0] as string, workaround);
    await waitFor(`http://${slot.hostAddress}:8080/`, 'hello from gvisor');
    // runsc took the address into its netstack.
    expect(await sh('ip', ['-n', slot.names.sandboxNs, '-4', 'addr', 'show', 'dev', 'eth0'])).not.toContain(
      'inet ',
    );

    const id = IDS[0] as string;
    expect(await sandboxGet(id, INTERNET_ADDRESS)).toEqual({ ok: true, out: `internet:${INTERNET_ADDRESS}` });
    expect(await sandboxGet(id, slot.rootSideAddress, 8080)).toMatchObject({ ok: false });
    expect(await sandboxGet(id, '169.254.169.254')).toMatchObject({ ok: false });

    await m.setEgress(slot, { allowInternet: false, allowOut: [], denyOut: [] });
    expect(await sandboxGet(id, INTERNET_ADDRESS)).toMatchObject({ ok: false });
    // Replies to the node's own connections still flow.
    expect((await fetchFromHost(`http://${slot.hostAddress}:8080/`)).body).toBe('hello from gvisor');

    await removeSandbox(id);
    await slot.reset();
    await startSandbox(bundle, IDS[1] as string, workaround);
    await waitFor(`http://${slot.hostAddress}:8080/`, 'hello from gvisor');
    await removeSandbox(IDS[1] as string);
    await m.release(slot);
  });
});
