import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildToolsBundle, type ToolsManifest } from '../../scripts/build-tools-bundle.js';

// The tools bundle must run envd in a root filesystem that has no Node.js and no libc at all:
// here a busybox-static one, with the bundle bind-mounted read-only as the runtime would.
const PORT = 49990;
const URL_BASE = `http://127.0.0.1:${PORT}`;
const MOUNT = '/opt/aenv-tools';
// unshare, mount and chroot run on the host; the same PATH then serves busybox in the rootfs.
const HOST_PATH = '/usr/sbin:/usr/bin:/sbin:/bin';

let tmp: string;
let bundle: string;
let rootfs: string;
let manifest: ToolsManifest;
let envd: ChildProcess | undefined;
let envdExited: Promise<void> | undefined;

/** A minimal root filesystem: busybox and its applets, root in /etc/passwd, /tmp, /proc, /dev. */
function makeRootfs(root: string): void {
  for (const d of ['bin', 'etc', 'tmp', 'proc', 'dev', 'root', 'usr/bin', MOUNT.slice(1)]) {
    fs.mkdirSync(path.join(root, d), { recursive: true });
  }
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  fs.copyFileSync(fs.realpathSync('/bin/busybox'), path.join(root, 'bin/busybox'));
  fs.chmodSync(path.join(root, 'bin/busybox'), 0o755);
  for (const applet of ['sh', 'echo', 'cat', 'ls', 'env', 'sleep']) {
    fs.symlinkSync('busybox', path.join(root, 'bin', applet));
  }
  fs.writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  fs.writeFileSync(path.join(root, 'etc/group'), 'root:x:0:\n');
  // napi-rs loaders read this to decide the root filesystem is Alpine (musl): the bundle must
  // still load its glibc builds.
  fs.writeFileSync(path.join(root, 'usr/bin/ldd'), '#!/bin/sh\n# musl libc (x86_64)\n', { mode: 0o755 });
}

/**
 * argv running `cmd` chrooted in the rootfs, in private mount and pid namespaces: the mounts
 * (bundle read-only, /proc, /dev) vanish with the namespace, so the host is never left with any.
 */
function inRootfs(cmd: string[]): string[] {
  const setup =
    'mount --bind "$1" "$2$3" && mount -o remount,bind,ro "$2$3" && mount -t proc proc "$2/proc" && ' +
    'mount --rbind /dev "$2/dev" && r=$2 && shift 3 && exec chroot "$r" "$@"';
  return [
    '--mount',
    '--pid',
    '--fork',
    '--kill-child',
    'sh',
    '-c',
    setup,
    'sh',
    bundle,
    rootfs,
    MOUNT,
    ...cmd,
  ];
}

async function waitHealthy(child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`envd exited (${child.exitCode ?? child.signalCode}) before it answered /health`);
    }
    try {
      // Each try is bounded: a listener that accepts but never answers must not hold the hook.
      if ((await fetch(`${URL_BASE}/health`, { signal: AbortSignal.timeout(2_000) })).status === 204) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`envd did not answer /health within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A Connect streaming envelope: flags byte, 4-byte big-endian length, JSON message. */
function envelope(message: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(message));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

function parseEnvelopes(buf: Buffer): { flags: number; message: Record<string, unknown> }[] {
  const out: { flags: number; message: Record<string, unknown> }[] = [];
  for (let at = 0; at + 5 <= buf.length;) {
    const len = buf.readUInt32BE(at + 1);
    out.push({ flags: buf[at]!, message: JSON.parse(buf.subarray(at + 5, at + 5 + len).toString('utf8')) });
    at += 5 + len;
  }
  return out;
}

/** Runs process.Process/Start over the Connect streaming protocol; returns one output stream. */
async function startOutput(request: unknown, stream: 'stdout' | 'pty'): Promise<string> {
  const res = await fetch(`${URL_BASE}/process.Process/Start`, {
    method: 'POST',
    headers: { 'content-type': 'application/connect+json' },
    body: envelope(request),
    signal: AbortSignal.timeout(15_000),
  });
  expect(res.status).toBe(200);
  const frames = parseEnvelopes(Buffer.from(await res.arrayBuffer()));
  expect(frames.at(-1)?.flags).toBe(2); // end of stream
  expect(frames.at(-1)?.message.error).toBeUndefined();
  return frames
    .map((f) => (f.message.event as { data?: Record<string, string> } | undefined)?.data?.[stream])
    .filter((s): s is string => s !== undefined)
    .map((s) => Buffer.from(s, 'base64').toString('utf8'))
    .join('');
}

describe('envd tools bundle', () => {
  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'aenv-tools-bundle-'));
    bundle = path.join(tmp, 'bundle');
    rootfs = path.join(tmp, 'rootfs');
    manifest = await buildToolsBundle({ outDir: bundle });
    makeRootfs(rootfs);
    envd = spawn('unshare', inRootfs([`${MOUNT}/bin/envd`, '--port', String(PORT)]), {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { PATH: HOST_PATH, AENV_ENVD_LOG_LEVEL: 'warn' },
    });
    const child = envd;
    envdExited = new Promise((resolve) => child.once('exit', () => resolve()));
    await waitHealthy(child, 60_000);
  });

  afterAll(async () => {
    // SIGKILL: unshare ignores SIGTERM while it waits; --kill-child takes the namespace down.
    if (envd && envd.exitCode === null && envd.signalCode === null) envd.kill('SIGKILL');
    await envdExited;
    if (tmp) {
      const mounts = fs.readFileSync('/proc/self/mounts', 'utf8');
      if (mounts.includes(tmp)) throw new Error(`mounts left under ${tmp}`);
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('holds node, the loader, the libraries, the native modules and a manifest', () => {
    const files = new Set(manifest.files.map((f) => f.path));
    for (const f of ['bin/envd', 'bin/node', 'envd.mjs', manifest.entry.loader, 'lib/libc.so.6']) {
      expect(files).toContain(f);
    }
    expect(files).toContain('node_modules/node-pty/build/Release/pty.node');
    expect(manifest.nodeVersion).toBe(process.versions.node);
    expect(manifest.contentHash).toMatch(/^[0-9a-f]{64}$/);
    const onDisk = JSON.parse(fs.readFileSync(path.join(bundle, 'manifest.json'), 'utf8'));
    expect(onDisk).toEqual(manifest);
    expect(fs.existsSync(path.join(rootfs, 'usr/bin/node'))).toBe(false);
  });

  it('serves /health and /envs from a root filesystem without Node.js', async () => {
    expect((await fetch(`${URL_BASE}/health`)).status).toBe(204);
    const envs = await fetch(`${URL_BASE}/envs`);
    expect(envs.status).toBe(200);
    expect(await envs.json()).toEqual({});
  });

  it('starts processes, on pipes and on a terminal, in the foreign root filesystem', async () => {
    const cmd = { cmd: '/bin/sh', args: ['-c', 'echo hi'] };
    expect(await startOutput({ process: cmd }, 'stdout')).toBe('hi\n'); // "aGkK" on the wire
    expect(await startOutput({ process: cmd, pty: { size: { cols: 80, rows: 24 } } }, 'pty')).toBe('hi\r\n');
  });

  it('runs by the direct exec form, without leaking its libraries to child processes', () => {
    const { loader, libraryPath, node } = manifest.entry;
    const script = "process.stdout.write(require('child_process').execSync('env').toString())";
    const out = execFileSync(
      'unshare',
      inRootfs([
        `${MOUNT}/${loader}`,
        '--library-path',
        `${MOUNT}/${libraryPath}`,
        `${MOUNT}/${node}`,
        '-e',
        script,
      ]),
      { encoding: 'utf8', env: { PATH: HOST_PATH } },
    );
    expect(out).toContain(`PATH=${HOST_PATH}`);
    expect(out).not.toContain('LD_LIBRARY_PATH');
    expect(out).not.toContain(MOUNT);
  });
});
