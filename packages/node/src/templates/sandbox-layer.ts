import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { VOLUMES_SANDBOX_PATH } from '@agentenv/protocol';
import { TOOLS_SANDBOX_PATH } from '../envd/index.js';
import type { LayerStore } from '@agentenv/oci';
import { sha256Hex } from './base/index.js';

export interface SandboxLayerOptions {
  readonly hostname?: string;
  /** Sandboxes cannot reach the host's resolver (loopback / private ranges). */
  readonly nameservers?: readonly string[];
}

/**
 * What an arbitrary OCI image lacks to run as a sandbox, as one small read-only layer to stack
 * on top of the image's layers: the mount points the runtime's OCI spec, the tools bundle and the
 * volumes need (/proc, /sys, /dev, /tmp, /opt/aenv-tools, /.aenv-volumes — runsc fails to start
 * without them on a read-only root) and the network identity files a container engine would bind-mount (/etc/resolv.conf,
 * /etc/hosts, /etc/hostname). The mmdebstrap base template bakes the same things in.
 * Content-addressed, so every image on the node shares it. Returns its rootfs directory.
 */
export async function ensureSandboxLayer(
  layers: LayerStore,
  opts: SandboxLayerOptions = {},
): Promise<string> {
  const hostname = opts.hostname ?? 'aenv';
  const nameservers = opts.nameservers ?? ['1.1.1.1', '8.8.8.8'];
  const files: Record<string, string> = {
    'etc/resolv.conf': nameservers.map((n) => `nameserver ${n}\n`).join(''),
    'etc/hosts': `127.0.0.1 localhost ${hostname}\n::1 localhost ip6-localhost ip6-loopback\n`,
    'etc/hostname': `${hostname}\n`,
  };
  const dirs = [
    'proc',
    'sys',
    'dev',
    'tmp',
    TOOLS_SANDBOX_PATH.replace(/^\//, ''),
    VOLUMES_SANDBOX_PATH.replace(/^\//, ''),
    'etc',
  ];
  const id = `sandbox-glue-${sha256Hex(JSON.stringify({ v: 1, files, dirs })).slice(0, 32)}`;
  return layers.ensure(id, { kind: 'sandbox-glue', hostname, nameservers }, async (root) => {
    for (const d of dirs) {
      await mkdir(join(root, d), { recursive: true });
      // every component, whatever the umask
      const parts = d.split('/');
      for (let i = 1; i <= parts.length; i++) await chmod(join(root, ...parts.slice(0, i)), 0o755);
    }
    await chmod(join(root, 'tmp'), 0o1777);
    for (const [p, text] of Object.entries(files)) await writeFile(join(root, p), text, { mode: 0o644 });
  });
}
