import type { InitProcess, ReadOnlyMount, Resources } from '../driver.js';

export interface OciSpecInput {
  /** The root directory (a template layer, or a read-only merge of several). */
  readonly rootfs: string;
  readonly init: InitProcess;
  readonly mounts: readonly ReadOnlyMount[];
  /** A mount for the sandbox's volumes (volumes.ts); absent for runsc baselines. */
  readonly volumes?: Record<string, unknown>;
  readonly resources: Resources;
  /** Absent: no network namespace is joined (runsc runs with --network=none). */
  readonly netnsPath?: string;
  readonly hostname: string;
  /** cgroup path relative to each controller's mount, e.g. `/aenv/<id>`. */
  readonly cgroupsPath: string;
  /** true when the writable layer lives in the sandbox's memory (it then counts against the limit). */
  readonly upperInMemory: boolean;
  /** Host CPUs the sandbox may run on (its cpuset); absent: all of them. */
  readonly cpus?: readonly number[];
}

const CFS_PERIOD_US = 100_000;
const MIB = 1024 * 1024;

/**
 * gVisor is the isolation boundary, so inside it root gets the full capability set: agents
 * install packages, mount tmpfs, trace processes. None of these reach the host kernel.
 */
const CAPABILITIES = [
  'CAP_AUDIT_CONTROL',
  'CAP_AUDIT_READ',
  'CAP_AUDIT_WRITE',
  'CAP_BLOCK_SUSPEND',
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_DAC_READ_SEARCH',
  'CAP_FOWNER',
  'CAP_FSETID',
  'CAP_IPC_LOCK',
  'CAP_IPC_OWNER',
  'CAP_KILL',
  'CAP_LEASE',
  'CAP_LINUX_IMMUTABLE',
  'CAP_MAC_ADMIN',
  'CAP_MAC_OVERRIDE',
  'CAP_MKNOD',
  'CAP_NET_ADMIN',
  'CAP_NET_BIND_SERVICE',
  'CAP_NET_BROADCAST',
  'CAP_NET_RAW',
  'CAP_SETFCAP',
  'CAP_SETGID',
  'CAP_SETPCAP',
  'CAP_SETUID',
  'CAP_SYS_ADMIN',
  'CAP_SYS_BOOT',
  'CAP_SYS_CHROOT',
  'CAP_SYS_MODULE',
  'CAP_SYS_NICE',
  'CAP_SYS_PACCT',
  'CAP_SYS_PTRACE',
  'CAP_SYS_RAWIO',
  'CAP_SYS_RESOURCE',
  'CAP_SYS_TIME',
  'CAP_SYS_TTY_CONFIG',
  'CAP_SYSLOG',
  'CAP_WAKE_ALARM',
];

const DEFAULT_ENV: Record<string, string> = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: '/root',
  LANG: 'C.UTF-8',
};

/** Bytes of memory the sandbox may hold: its RAM plus, if in memory, its writable layer. */
export function memoryLimitBytes(resources: Resources, upperInMemory: boolean): number {
  return (resources.memoryMB + (upperInMemory ? resources.diskSizeMB : 0)) * MIB;
}

/** The OCI runtime spec (config.json) of one sandbox. Pure: same input, same document. */
export function buildOciSpec(input: OciSpecInput): Record<string, unknown> {
  const env = { ...DEFAULT_ENV, ...input.init.env };
  const namespaces: { type: string; path?: string }[] = [
    { type: 'pid' },
    { type: 'ipc' },
    { type: 'uts' },
    { type: 'mount' },
    input.netnsPath ? { type: 'network', path: input.netnsPath } : { type: 'network' },
  ];
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      // envd runs as root because it starts processes as other users.
      user: { uid: 0, gid: 0 },
      args: [...input.init.args],
      env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
      cwd: input.init.cwd ?? '/',
      capabilities: {
        bounding: CAPABILITIES,
        effective: CAPABILITIES,
        inheritable: CAPABILITIES,
        permitted: CAPABILITIES,
      },
      rlimits: [{ type: 'RLIMIT_NOFILE', hard: 1_048_576, soft: 1_048_576 }],
      // sudo must be able to raise privileges.
      noNewPrivileges: false,
    },
    // Not read-only: runsc only puts its overlay (the sandbox's private writable layer) over a
    // writable root; the host directory itself is never written through the overlay.
    root: { path: input.rootfs, readonly: false },
    hostname: input.hostname,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755'] },
      {
        destination: '/dev/pts',
        type: 'devpts',
        source: 'devpts',
        options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'],
      },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'nodev', 'mode=1777'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      ...input.mounts.map((m) => ({
        destination: m.sandboxPath,
        type: 'bind',
        source: m.hostPath,
        options: ['rbind', m.writable ? 'rw' : 'ro', 'nosuid', 'nodev'],
      })),
      ...(input.volumes ? [input.volumes] : []),
    ],
    linux: {
      namespaces,
      cgroupsPath: input.cgroupsPath,
      resources: {
        memory: { limit: memoryLimitBytes(input.resources, input.upperInMemory) },
        cpu: {
          quota: Math.round(input.resources.cpuCount * CFS_PERIOD_US),
          period: CFS_PERIOD_US,
          ...(input.cpus?.length ? { cpus: input.cpus.join(',') } : {}),
        },
      },
    },
  };
}

/** Checks resources before anything is created, so a bad request leaves nothing behind. */
export function resourcesProblem(r: Resources): string | null {
  if (!Number.isFinite(r.cpuCount) || r.cpuCount <= 0 || r.cpuCount > 1024)
    return `bad cpuCount ${r.cpuCount}`;
  if (!Number.isInteger(r.memoryMB) || r.memoryMB < 64) return `bad memoryMB ${r.memoryMB} (minimum 64)`;
  if (!Number.isInteger(r.diskSizeMB) || r.diskSizeMB < 1) return `bad diskSizeMB ${r.diskSizeMB}`;
  return null;
}
