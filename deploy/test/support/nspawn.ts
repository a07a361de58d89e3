import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { CACHE } from './release.js';
import { until, mustRun, run, terminate, type RunResult } from './run.js';

/**
 * A fresh Debian 12 root booted with `systemd-nspawn -b` (systemd as its PID 1), sharing the host's
 * network namespace. The steps are those of MACHINE-RECIPES.md: the host has no systemd as PID 1,
 * so what systemd would have made on it is made first, and undone afterwards.
 */

const ROOT_TARBALL = path.join(CACHE, 'debian-bookworm-systemd.tar');
const APT_ARCHIVES = path.join(CACHE, 'apt-archives');
const INACCESSIBLE = '/run/systemd/inaccessible';
const NSPAWN_DIR = '/run/systemd/nspawn';
const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface Bind {
  readonly host: string;
  readonly guest: string;
  readonly readOnly?: boolean;
}

/** The root is made once with mmdebstrap (~20 s to minutes, by the mirror) and kept as a tarball. */
async function rootTarball(): Promise<string> {
  if (existsSync(ROOT_TARBALL)) return ROOT_TARBALL;
  mkdirSync(CACHE, { recursive: true });
  const partial = `${ROOT_TARBALL}.partial`;
  await mustRun('mmdebstrap', [
    '--variant=minbase',
    '--include=systemd,systemd-sysv,dbus,iproute2',
    '--format=tar',
    'bookworm',
    partial,
  ]);
  await mustRun('mv', [partial, ROOT_TARBALL]);
  return ROOT_TARBALL;
}

/** What the host's own systemd would have created; returns how to undo what was made here. */
async function prepareHost(): Promise<() => Promise<void>> {
  const undo: (() => Promise<unknown>)[] = [];
  if (!existsSync(INACCESSIBLE)) {
    mkdirSync(`${INACCESSIBLE}/dir`, { recursive: true });
    await mustRun('sh', [
      '-c',
      `cd ${INACCESSIBLE} && touch reg && mkfifo fifo && mknod chr c 0 0 && mknod blk b 0 0 && chmod 0000 reg dir fifo chr blk`,
    ]);
    undo.push(async () => rmSync(INACCESSIBLE, { recursive: true, force: true }));
  }
  if ((await run('mountpoint', ['-q', NSPAWN_DIR])).code !== 0) {
    mkdirSync(NSPAWN_DIR, { recursive: true });
    await mustRun('mount', ['-t', 'tmpfs', 'tmpfs', NSPAWN_DIR]);
    undo.push(() => run('umount', [NSPAWN_DIR]));
  }
  return async () => {
    for (const step of undo.reverse()) await step();
  };
}

export class BootedDebian {
  private nspawn?: ChildProcess;
  private leader = 0;
  private log = '';
  private undoHost: () => Promise<void> = async () => undefined;

  private constructor(
    readonly name: string,
    readonly root: string,
  ) {}

  /** Unpacks a fresh root under `dir` (removed by remove()). */
  static async create(name: string, dir: string): Promise<BootedDebian> {
    const root = path.join(dir, name);
    rmSync(root, { recursive: true, force: true });
    mkdirSync(root, { recursive: true });
    await mustRun('tar', ['-C', root, '-xf', await rootTarball()]);
    return new BootedDebian(name, root);
  }

  /**
   * Boots it. The node needs CAP_NET_ADMIN (iptables, namespaces) and writable /proc/sys, which
   * nspawn withholds unless asked; downloaded packages are kept on the host between runs.
   */
  async boot(binds: readonly Bind[] = []): Promise<void> {
    this.undoHost = await prepareHost();
    mkdirSync(APT_ARCHIVES, { recursive: true });
    const args = [
      '-D',
      this.root,
      '-b',
      '--register=no',
      '--keep-unit',
      `--machine=${this.name}`,
      '--console=pipe',
      '--capability=CAP_NET_ADMIN',
      `--bind=${APT_ARCHIVES}:/var/cache/apt/archives`,
      ...binds.map((b) => `--bind${b.readOnly ? '-ro' : ''}=${b.host}:${b.guest}`),
    ];
    this.nspawn = spawn('systemd-nspawn', args, {
      env: { ...process.env, SYSTEMD_NSPAWN_API_VFS_WRITABLE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (d: Buffer) => (this.log += d.toString());
    this.nspawn.stdout!.on('data', keep);
    this.nspawn.stderr!.on('data', keep);
    const nspawnPid = this.nspawn.pid!;
    this.leader = await until('the container’s systemd', async () => {
      if (this.nspawn?.exitCode !== null) throw new Error(`systemd-nspawn exited:\n${this.log}`);
      const children = readFileSync(`/proc/${nspawnPid}/task/${nspawnPid}/children`, 'utf8').trim();
      return children ? Number(children.split(' ')[0]) : undefined;
    });
    await until('systemd inside to finish booting', async () => {
      const r = await this.exec(['systemctl', 'is-system-running']);
      return ['running', 'degraded'].includes(r.stdout.trim());
    });
    // nspawn mounts the cgroup v1 controllers read-only; runsc creates a cgroup per sandbox in them.
    for (const controller of ['blkio', 'cpu', 'cpuacct', 'cpuset', 'devices', 'freezer', 'memory', 'pids']) {
      const dir = `/sys/fs/cgroup/${controller}`;
      await run('nsenter', [
        '-t',
        String(this.leader),
        '-m',
        '--',
        'sh',
        '-c',
        `[ ! -d ${dir} ] || mount -o remount,rw,bind ${dir}`,
      ]);
    }
  }

  /** Runs a command inside, in every namespace of the container, with a clean environment. */
  exec(cmd: readonly string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<RunResult> {
    return run(
      'nsenter',
      ['-t', String(this.leader), '-a', '--', 'env', '-i', PATH_ENV, 'HOME=/root', ...cmd],
      opts,
    );
  }

  async mustExec(cmd: readonly string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<string> {
    const r = await this.exec(cmd, opts);
    if (r.code !== 0)
      throw new Error(`${cmd.join(' ')} exited with ${r.code} inside ${this.name}:\n${r.stdout}${r.stderr}`);
    return r.stdout;
  }

  /** Powers the container off (its services stop the way they would on a host), then undoes the host steps. */
  async shutdown(): Promise<void> {
    await terminate(this.nspawn, 120_000);
    this.nspawn = undefined;
    await this.undoHost();
  }

  async remove(): Promise<void> {
    await this.shutdown();
    rmSync(this.root, { recursive: true, force: true });
  }

  output(): string {
    return this.log;
  }
}
