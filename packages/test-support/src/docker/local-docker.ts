import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { run, terminate, type RunResult } from '../commands.js';
import { eventually } from '../eventually.js';
import { pidAlive as alive } from '../processes.js';

/** An OCI runtime the engine offers besides runc (`docker run --runtime=<name>`). */
export interface DockerRuntime {
  readonly path: string;
  readonly runtimeArgs?: readonly string[];
}

export interface LocalDockerOptions {
  /** Runtimes by name, written into the engine's own daemon.json. */
  readonly runtimes?: Readonly<Record<string, DockerRuntime>>;
  /** `--experimental`: what `docker checkpoint` needs. */
  readonly experimental?: boolean;
  /** The cgroup the containers' cgroups go under (removed again by stop()). */
  readonly cgroupParent?: string;
}

const CGROUP_ROOT = '/sys/fs/cgroup';

/**
 * A Docker engine of its own (MACHINE-RECIPES.md): its own data root, exec root and socket, no
 * bridge and no iptables rules, so the host's firewall and any other engine are untouched.
 * Debian's docker.io client (/usr/bin/docker) talks to it; stop() removes all of it.
 */
export class LocalDocker {
  readonly socket: string;
  private daemon?: ChildProcess;
  private log = '';

  constructor(
    readonly dir: string,
    private readonly opts: LocalDockerOptions = {},
  ) {
    this.socket = path.join(dir, 'docker.sock');
  }

  /** Why no engine can be started here, or undefined when one can. */
  static missing(): string | undefined {
    if (process.getuid?.() !== 0) return 'starting dockerd needs root';
    if (!existsSync('/usr/sbin/dockerd') || !existsSync('/usr/bin/docker')) {
      return 'Debian’s docker.io is not installed (bash scripts/setup.sh --deploy installs it)';
    }
    return undefined;
  }

  /** Environment for a docker or docker-compose client pointed at this engine. */
  get env(): NodeJS.ProcessEnv {
    return { ...process.env, DOCKER_HOST: `unix://${this.socket}`, DOCKER: '/usr/bin/docker' };
  }

  /** dockerd's process id while it runs. */
  get pid(): number | undefined {
    return this.daemon?.exitCode === null ? this.daemon.pid : undefined;
  }

  async start(): Promise<void> {
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true });
    // Its own process group: a Ctrl-C on the terminal reaches the caller, whose stop() then
    // removes the containers before the engine.
    this.daemon = spawn('/usr/sbin/dockerd', this.daemonArgs(), {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const keep = (b: Buffer) => (this.log += b.toString());
    this.daemon.stdout!.on('data', keep);
    this.daemon.stderr!.on('data', keep);
    await eventually(
      async () => {
        if (this.daemon?.exitCode !== null) throw new Error(`dockerd exited:\n${this.log.slice(-2000)}`);
        if ((await this.docker(['version'])).code !== 0) throw new Error('dockerd does not answer');
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  }

  private daemonArgs(): string[] {
    const d = this.dir;
    const args = [
      `--data-root=${d}/root`,
      `--exec-root=${d}/exec`,
      `--pidfile=${d}/dockerd.pid`,
      `-H`,
      `unix://${this.socket}`,
      '--iptables=false',
      '--ip6tables=false',
      '--bridge=none',
    ];
    const { runtimes, experimental, cgroupParent } = this.opts;
    if (runtimes) {
      writeFileSync(path.join(d, 'daemon.json'), JSON.stringify({ runtimes }));
      args.push(`--config-file=${d}/daemon.json`);
    }
    if (experimental) args.push('--experimental');
    if (cgroupParent) args.push(`--cgroup-parent=${cgroupParent}`);
    return args;
  }

  docker(args: readonly string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<RunResult> {
    return run('/usr/bin/docker', args, { env: this.env, ...opts });
  }

  async mustDocker(args: readonly string[], opts: { timeoutMs?: number } = {}): Promise<string> {
    const r = await this.docker(args, opts);
    if (r.code !== 0)
      throw new Error(`docker ${args.join(' ')} exited with ${r.code}:\n${r.stdout}${r.stderr}`);
    return r.stdout;
  }

  /**
   * Removes every container, stops the engine, unmounts what it left, deletes its directory and
   * the containers' cgroup parent.
   */
  async stop(): Promise<void> {
    const daemon = this.daemon;
    if (daemon && daemon.exitCode === null) {
      const ids = (await this.docker(['ps', '-aq'])).stdout.split('\n').filter(Boolean);
      // Stopped first, so a node that a failed test left running removes its rules and namespaces.
      if (ids.length) await this.docker(['stop', '-t', '300', ...ids], { timeoutMs: 400_000 });
      if (ids.length) await this.docker(['rm', '-f', '-v', ...ids], { timeoutMs: 300_000 });
    }
    await terminate(daemon, 60_000);
    this.daemon = undefined;
    await this.killStragglers();
    const mounts = await run('sh', [
      '-c',
      `awk '{print $5}' /proc/self/mountinfo | grep '^${this.dir}/' | sort -r`,
    ]);
    for (const mnt of mounts.stdout.split('\n').filter(Boolean)) {
      if ((await run('umount', [mnt])).code !== 0) await run('umount', ['-l', mnt]);
    }
    rmSync(this.dir, { recursive: true, force: true });
    if (this.opts.cgroupParent) this.removeCgroupParent(this.opts.cgroupParent);
  }

  /**
   * Ends what the engine left running: a container whose start failed can keep its runtime's
   * processes (and their shim) after `docker rm -f` and the engine's exit. They are this engine's
   * by their command line (naming its directory) or their cgroup (under its cgroup parent).
   */
  private async killStragglers(): Promise<void> {
    const parent = this.opts.cgroupParent;
    const pids = new Set<number>();
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      const read = (f: string) => readFileQuietly(`/proc/${name}/${f}`);
      if (read('cmdline').includes(this.dir) || (parent && read('cgroup').includes(`/${parent}/`)))
        pids.add(Number(name));
    }
    pids.delete(process.pid);
    if (!pids.size) return;
    for (const pid of pids) killQuietly(pid);
    await eventually(
      () => {
        if ([...pids].some(alive)) throw new Error(`processes of the engine still run: ${[...pids]}`);
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  }

  /**
   * The cgroup parent in every hierarchy, at its root and below this process's own groups (where
   * a runtime may nest a container's group: runsc does with cgroup v1's memory controller).
   */
  private removeCgroupParent(parent: string): void {
    const own = new Set(
      readFileQuietly('/proc/self/cgroup')
        .split('\n')
        .map((l) => l.split(':')[2])
        .filter((p): p is string => !!p),
    );
    for (const controller of existsSync(CGROUP_ROOT) ? readdirNames(CGROUP_ROOT) : []) {
      for (const base of own) {
        const dir = path.join(CGROUP_ROOT, controller, base, parent);
        if (!existsSync(dir)) continue;
        // Its children first: an engine that was killed leaves its containers' groups behind.
        for (const child of readdirNames(dir)) rmdirQuietly(path.join(dir, child));
        rmdirQuietly(dir);
      }
    }
  }

  output(): string {
    return this.log;
  }
}

function readFileQuietly(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

const readdirNames = (dir: string) =>
  readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name);

function rmdirQuietly(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // Still in use or already gone: what is left shows in the caller's leftover check.
  }
}
