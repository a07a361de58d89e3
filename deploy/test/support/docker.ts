import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { eventually, run, terminate, type RunResult } from './run.js';

/**
 * A Docker engine of the test's own (MACHINE-RECIPES.md): its own data root, exec root and socket,
 * no bridge and no iptables rules, so the host's firewall and any other engine are untouched.
 * Debian's docker.io client (/usr/bin/docker) talks to it; stop() removes all of it.
 */
export class LocalDocker {
  readonly socket: string;
  private daemon?: ChildProcess;
  private log = '';

  constructor(readonly dir: string) {
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

  async start(): Promise<void> {
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true });
    const d = this.dir;
    this.daemon = spawn(
      '/usr/sbin/dockerd',
      [
        `--data-root=${d}/root`,
        `--exec-root=${d}/exec`,
        `--pidfile=${d}/dockerd.pid`,
        `-H`,
        `unix://${this.socket}`,
        '--iptables=false',
        '--ip6tables=false',
        '--bridge=none',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const keep = (b: Buffer) => (this.log += b.toString());
    this.daemon.stdout!.on('data', keep);
    this.daemon.stderr!.on('data', keep);
    await eventually(
      'dockerd to answer',
      async () => {
        if (this.daemon?.exitCode !== null) throw new Error(`dockerd exited:\n${this.log.slice(-2000)}`);
        return (await this.docker(['version'])).code === 0;
      },
      60_000,
    );
  }

  docker(args: readonly string[], opts: { timeoutMs?: number } = {}): Promise<RunResult> {
    return run('/usr/bin/docker', args, { env: this.env, ...opts });
  }

  async mustDocker(args: readonly string[], opts: { timeoutMs?: number } = {}): Promise<string> {
    const r = await this.docker(args, opts);
    if (r.code !== 0)
      throw new Error(`docker ${args.join(' ')} exited with ${r.code}:\n${r.stdout}${r.stderr}`);
    return r.stdout;
  }

  /** Removes every container, stops the engine, unmounts what it left, deletes its directory. */
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
    const mounts = await run('sh', [
      '-c',
      `awk '{print $5}' /proc/self/mountinfo | grep '^${this.dir}/' | sort -r`,
    ]);
    for (const mnt of mounts.stdout.split('\n').filter(Boolean)) {
      if ((await run('umount', [mnt])).code !== 0) await run('umount', ['-l', mnt]);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  output(): string {
    return this.log;
  }
}
