import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONSOLE_LOG, consoleLog } from '../../src/runtime/gvisor/bundle.js';
import { buildOciSpec, memoryLimitBytes, resourcesProblem } from '../../src/runtime/gvisor/oci-spec.js';
import { parseRunscVersion, runscVersionProblem } from '../../src/runtime/gvisor/version.js';
import {
  isConnectedStateError,
  runscGlobalArgs,
  wrapForNetSysctlQuirk,
} from '../../src/runtime/gvisor/runsc.js';
import { containerOfRunscFile, DriverLayout } from '../../src/runtime/gvisor/layout.js';
import { runnableNs } from '../../src/runtime/gvisor/schedstat.js';
import { isSandboxId, newSandboxId, SANDBOX_ID_LENGTH } from '../../src/runtime/ids.js';

const input = {
  rootfs: '/layers/abc/rootfs',
  init: { args: ['/opt/aenv-tools/bin/envd', '--port', '49983'], env: { FOO: 'bar' } },
  mounts: [{ hostPath: '/layers/tools/rootfs', sandboxPath: '/opt/aenv-tools' }],
  resources: { cpuCount: 2, memoryMB: 1024, diskSizeMB: 2048 },
  netnsPath: '/run/netns/s1',
  hostname: 'aenv',
  cgroupsPath: '/aenv/aenv-0123456789abcdef0123',
  upperInMemory: true,
};

describe('buildOciSpec', () => {
  it('is deterministic', () => {
    expect(JSON.stringify(buildOciSpec(input))).toBe(JSON.stringify(buildOciSpec(input)));
  });

  it('maps resources to cgroup limits, counting an in-memory writable layer', () => {
    const spec = buildOciSpec(input) as {
      linux: { resources: { memory: { limit: number }; cpu: { quota: number; period: number } } };
    };
    expect(spec.linux.resources.cpu).toEqual({ quota: 200_000, period: 100_000 });
    expect(spec.linux.resources.memory.limit).toBe((1024 + 2048) * 1024 * 1024);
    expect(memoryLimitBytes(input.resources, false)).toBe(1024 * 1024 * 1024);
  });

  it('joins the network namespace only when given, and mounts tools read-only', () => {
    const spec = buildOciSpec(input) as {
      linux: { namespaces: { type: string; path?: string }[] };
      mounts: { destination: string; options?: string[] }[];
    };
    expect(spec.linux.namespaces).toContainEqual({ type: 'network', path: '/run/netns/s1' });
    const tools = spec.mounts.find((m) => m.destination === '/opt/aenv-tools');
    expect(tools?.options).toContain('ro');
    const noNet = buildOciSpec({ ...input, netnsPath: undefined }) as typeof spec;
    expect(noNet.linux.namespaces).toContainEqual({ type: 'network' });
  });

  it('runs envd as root with the given args and env over a writable root', () => {
    const spec = buildOciSpec(input) as {
      process: { args: string[]; env: string[]; user: { uid: number } };
      root: { readonly: boolean };
    };
    expect(spec.process.args).toEqual(input.init.args);
    expect(spec.process.env).toContain('FOO=bar');
    expect(spec.process.env.some((e) => e.startsWith('PATH='))).toBe(true);
    expect(spec.process.user.uid).toBe(0);
    expect(spec.root.readonly).toBe(false);
  });
});

describe('resourcesProblem', () => {
  it('accepts sane values and names bad ones', () => {
    expect(resourcesProblem({ cpuCount: 0.5, memoryMB: 256, diskSizeMB: 1 })).toBeNull();
    expect(resourcesProblem({ cpuCount: 0, memoryMB: 256, diskSizeMB: 1 })).toMatch(/cpuCount/);
    expect(resourcesProblem({ cpuCount: 1, memoryMB: 10, diskSizeMB: 1 })).toMatch(/memoryMB/);
    expect(resourcesProblem({ cpuCount: 1, memoryMB: 256, diskSizeMB: 1.5 })).toMatch(/diskSizeMB/);
  });
});

describe('runsc version', () => {
  it('parses Debian and upstream version strings', () => {
    expect(parseRunscVersion('runsc version 0.0~20240729.0\nspec: 1.0.2-dev\n')).toEqual({
      raw: '0.0~20240729.0',
      date: 20240729,
    });
    expect(parseRunscVersion('runsc version release-20250106.0\n')).toEqual({
      raw: 'release-20250106.0',
      date: 20250106,
    });
    expect(parseRunscVersion('garbage')).toBeNull();
  });

  it('rejects the Debian 12 main build with the fix in the message', () => {
    const old = parseRunscVersion('runsc version 0.0~20221219.0\n');
    expect(runscVersionProblem(old, '')).toMatch(/bookworm-backports runsc/);
    expect(runscVersionProblem(parseRunscVersion('runsc version 0.0~20240729.0'), '')).toBeNull();
    expect(runscVersionProblem(null, 'weird')).toMatch(/cannot parse/);
  });
});

describe('runsc command lines', () => {
  it('repeats the per-sandbox flags', () => {
    const args = runscGlobalArgs({
      root: '/run/aenv/runsc',
      overlay: 'root:memory',
      network: 'sandbox',
      netDisconnectOk: true,
    });
    expect(args).toEqual([
      '--root=/run/aenv/runsc',
      '--platform=systrap',
      '--overlay2=root:memory',
      '--network=sandbox',
      '--cpu-num-from-quota',
      '--net-disconnect-ok',
    ]);
  });

  it('wraps runsc in a private mount namespace hiding /proc/sys/net', () => {
    const argv = wrapForNetSysctlQuirk(['runsc', 'run', 'x']);
    expect(argv.slice(0, 5)).toEqual(['unshare', '--mount', '--propagation', 'private', '--']);
    expect(argv.join(' ')).toContain('/proc/sys/net');
    expect(argv.slice(-3)).toEqual(['runsc', 'run', 'x']);
  });

  it('recognises the connected-endpoint checkpoint refusal', () => {
    expect(isConnectedStateError('endpoint cannot be saved in connected state: local 10.0.0.2:49983')).toBe(
      true,
    );
    expect(isConnectedStateError('no space left on device')).toBe(false);
  });
});

describe("a thread's schedstat", () => {
  it('gives the time it ran plus the time it waited for a CPU', () => {
    expect(runnableNs('308629090 138845 4\n')).toBe(308629090 + 138845);
    expect(runnableNs('')).toBeNull();
    expect(runnableNs('12 x 3')).toBeNull();
  });
});

describe('sandbox ids', () => {
  it('have a fixed length so none is a prefix of another', () => {
    const ids = Array.from({ length: 200 }, () => newSandboxId());
    for (const id of ids) {
      expect(id).toHaveLength(SANDBOX_ID_LENGTH);
      expect(isSandboxId(id)).toBe(true);
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(isSandboxId('aenv-1')).toBe(false);
  });
});

describe("runsc's files under its root", () => {
  it('names the files a container leaves, and maps each back to its container', () => {
    const layout = new DriverLayout('/run/aenv-x/x', 'aenv-x');
    const files = layout.runscFiles('aenv-0123456789abcdef0123');
    expect(files).toEqual([
      '/run/aenv-x/x/runsc/aenv-0123456789abcdef0123_sandbox:aenv-0123456789abcdef0123.lock',
      '/run/aenv-x/x/runsc/aenv-0123456789abcdef0123_sandbox:aenv-0123456789abcdef0123.state',
      '/run/aenv-x/x/runsc/runsc-aenv-0123456789abcdef0123.sock',
    ]);
    for (const f of files)
      expect(containerOfRunscFile(f.split('/').at(-1)!)).toBe('aenv-0123456789abcdef0123');
    for (const other of ['runsc.log', 'a_sandbox:b.lock', 'runsc-.sock.x', 'aenv-1.state'])
      expect(containerOfRunscFile(other)).toBeUndefined();
  });
});

describe('a sandbox console in an error', () => {
  it('keeps the end of a long console, and is empty when there is none', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'aenv-console-'));
    try {
      expect(await consoleLog({ dir })).toBe('');
      await writeFile(join(dir, CONSOLE_LOG), 'x'.repeat(200_000) + 'the last line\n');
      const kept = await consoleLog({ dir });
      expect(kept.length).toBe(64 * 1024);
      expect(kept.endsWith('the last line\n')).toBe(true);
      await writeFile(join(dir, CONSOLE_LOG), 'short\n');
      expect(await consoleLog({ dir })).toBe('short\n');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
