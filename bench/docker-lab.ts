/**
 * The same work done the way a user would without AgentENV, for bench/lifecycle.ts and
 * bench/density.ts: Docker with runsc as a runtime (`docker run --runtime=runsc`, `docker exec`,
 * `docker checkpoint create`, `docker start --checkpoint`, `docker rm -f`, `docker pause`).
 *
 * The engine is a private one (LocalDocker: its own data root, exec root and socket under the
 * lab's directory, no bridge, no iptables rules, `--experimental` for checkpoints, its containers'
 * cgroups under a parent of the lab's); stop() removes it with every container, image and cgroup.
 *
 * Like for like with the node: the image is imported from the root filesystem the node's base
 * template restores (its capture's layer); runsc runs with the node's flags (runscGlobalArgs;
 * Docker's shim adds its own --root) and, on hosts that show rmem_default in every network
 * namespace, the node's workaround; each container gets the template's CPUs and memory and runs
 * `sleep infinity` with `--network none` (loopback only, no bridge, so the host's firewall is
 * untouched), and "answers a command" is `docker exec <id> true` returning.
 */
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runscGlobalArgs, wrapForNetSysctlQuirk, type GvisorHost } from '@agentenv/node';
import { readCapture } from '@agentenv/snapshot';
import { run } from '@agentenv/test-support';
import { LocalDocker } from '@agentenv/test-support/docker';
import { timeMs } from './stats.js';

const IMAGE = 'aenv-bench/base';

/** Samples, or why Docker could not do it here (the first line of its error). */
export type DockerMeasure = { ms: number[] } | { failed: string };

export interface DockerLifecycle {
  /** `docker run -d` until `docker exec … true` returns. */
  create?: DockerMeasure;
  /** `docker rm -f` of a running container. */
  kill?: DockerMeasure;
  /** `docker checkpoint create` (the container stops). */
  checkpoint?: DockerMeasure;
  /** `docker start --checkpoint` until `docker exec … true` returns. */
  restore?: DockerMeasure;
  /** `docker checkpoint create --leave-running`. */
  checkpointLeaveRunning?: DockerMeasure;
  /** k containers started in parallel until each answers, by k. */
  parallel?: Map<number, DockerMeasure>;
}

export class DockerLab {
  private readonly engine: LocalDocker;
  private seq = 0;
  /** `docker run` flags giving each container the template's CPUs and memory. */
  private limits: string[] = [];

  constructor(
    private readonly host: GvisorHost,
    readonly dir: string,
    readonly cgroupParent: string,
  ) {
    this.engine = new LocalDocker(join(dir, 'engine'), {
      runtimes: { runsc: { path: join(dir, 'runsc') } },
      experimental: true,
      cgroupParent,
    });
  }

  /** Why Docker cannot run here, or undefined when it can. */
  static missing(): string | undefined {
    return LocalDocker.missing();
  }

  /** dockerd's process id while it runs. */
  get dockerdPid(): number | undefined {
    return this.engine.pid;
  }

  /** Starts the engine and imports the root filesystem `capture` restores as the containers' image. */
  async start(capture: string): Promise<void> {
    const { meta } = await readCapture(capture);
    const rootfs = meta.layers[0];
    if (!rootfs) throw new Error(`${capture} names no root filesystem layer`);
    this.limits = ['--cpus', String(meta.resources.cpuCount), '--memory', `${meta.resources.memoryMB}m`];
    await rm(this.dir, { recursive: true, force: true });
    await mkdir(this.dir, { recursive: true });
    await writeFile(join(this.dir, 'runsc'), runscWrapper(this.host), { mode: 0o755 });
    await this.engine.start();
    const r = await run(
      'bash',
      ['-o', 'pipefail', '-c', 'tar -C "$0" -c . | /usr/bin/docker import - "$1"', rootfs, IMAGE],
      { env: this.engine.env, timeoutMs: 600_000 },
    );
    if (r.code !== 0) throw new Error(`docker import of ${rootfs}: ${r.stderr}`);
  }

  /** Removes every container (`docker rm -f`: sleep as PID 1 ignores docker stop's SIGTERM), then the engine. */
  async stop(): Promise<void> {
    if (this.engine.pid !== undefined) {
      const ids = (await this.engine.docker(['ps', '-aq'])).stdout.split('\n').filter(Boolean);
      if (ids.length) await this.engine.docker(['rm', '-f', ...ids], { timeoutMs: 300_000 });
    }
    await this.engine.stop();
    await rm(this.dir, { recursive: true, force: true });
  }

  output(): string {
    return this.engine.output();
  }

  /** A container running `sleep infinity` that has answered a command; its full id. */
  async started(): Promise<string> {
    const name = `aenv-bench-${this.seq++}`;
    const id = (
      await this.engine.mustDocker([
        'run',
        '-d',
        '--name',
        name,
        '--runtime=runsc',
        '--network',
        'none',
        ...this.limits,
        IMAGE,
        'sleep',
        'infinity',
      ])
    ).trim();
    await this.answers(id);
    return id;
  }

  private answers(id: string): Promise<string> {
    return this.engine.mustDocker(['exec', id, 'true']);
  }

  private remove(id: string): Promise<string> {
    return this.engine.mustDocker(['rm', '-f', id]);
  }

  /** The lifecycle rows' work, `iter` times each (parallel starts `reps` times per size). */
  async lifecycle(
    iter: number,
    reps: number,
    parts: { create?: boolean; pause?: boolean; snapshot?: boolean; parallel?: readonly number[] },
  ): Promise<DockerLifecycle> {
    const out: DockerLifecycle = {};
    if (parts.create) Object.assign(out, await this.createKill(iter));
    if (parts.pause) Object.assign(out, await this.pauseResume(iter));
    if (parts.snapshot) out.checkpointLeaveRunning = await this.leaveRunning(iter);
    if (parts.parallel) {
      out.parallel = new Map();
      for (const k of parts.parallel) out.parallel.set(k, await attempt(() => this.parallel(k, reps)));
    }
    return out;
  }

  private async createKill(iter: number): Promise<Pick<DockerLifecycle, 'create' | 'kill'>> {
    const create: number[] = [];
    const kill: number[] = [];
    try {
      for (let i = 0; i < iter; i++) {
        let id = '';
        create.push(await timeMs(async () => (id = await this.started())));
        kill.push(await timeMs(() => this.remove(id)));
      }
      return { create: { ms: create }, kill: { ms: kill } };
    } catch (e) {
      return { create: failed(e), kill: failed(e) };
    }
  }

  /**
   * Checkpoints that stop a container and starts from them, one after another on one container;
   * a step that fails ends the series, its error the result.
   */
  private async pauseResume(iter: number): Promise<Pick<DockerLifecycle, 'checkpoint' | 'restore'>> {
    const id = await this.started();
    const checkpoint: number[] = [];
    const restore: number[] = [];
    let step: 'checkpoint' | 'restore' = 'checkpoint';
    try {
      for (let i = 0; i < iter; i++) {
        step = 'checkpoint';
        checkpoint.push(
          await timeMs(() => this.engine.mustDocker(['checkpoint', 'create', id, `pause-${i}`])),
        );
        step = 'restore';
        restore.push(
          await timeMs(async () => {
            await this.engine.mustDocker(['start', '--checkpoint', `pause-${i}`, id]);
            await this.answers(id);
          }),
        );
        await this.engine.mustDocker(['checkpoint', 'rm', id, `pause-${i}`]);
      }
      return { checkpoint: { ms: checkpoint }, restore: { ms: restore } };
    } catch (e) {
      return step === 'checkpoint'
        ? { checkpoint: failed(e), restore: { failed: 'no checkpoint to start from' } }
        : { checkpoint: { ms: checkpoint }, restore: failed(e) };
    } finally {
      await this.remove(id);
    }
  }

  /** Checkpoints of a container that keeps running (what a snapshot is). */
  private async leaveRunning(iter: number): Promise<DockerMeasure> {
    const id = await this.started();
    try {
      return await attempt(async () => {
        const ms: number[] = [];
        for (let i = 0; i < iter; i++) {
          const name = `snap-${i}`;
          ms.push(
            await timeMs(() => this.engine.mustDocker(['checkpoint', 'create', '--leave-running', id, name])),
          );
          await this.engine.mustDocker(['checkpoint', 'rm', id, name]);
        }
        return ms;
      });
    } finally {
      await this.remove(id);
    }
  }

  /** `k` containers started in parallel until each answered a command, `reps` times. */
  private async parallel(k: number, reps: number): Promise<number[]> {
    const out: number[] = [];
    for (let rep = 0; rep < reps; rep++) {
      let ids: string[] = [];
      out.push(
        await timeMs(async () => {
          ids = await Promise.all(Array.from({ length: k }, () => this.started()));
        }),
      );
      await Promise.all(ids.map((id) => this.remove(id)));
    }
    return out;
  }

  /** `n` idle containers, started one after another, each until it answered; their full ids. */
  async idle(n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push(await this.started());
    return ids;
  }

  /**
   * `docker pause` of each: under runsc that is `runsc pause` (the sandbox's kernel stops the
   * container's tasks), not the cgroup freezer the node freezes idle sandboxes with.
   */
  async pause(ids: readonly string[]): Promise<void> {
    await this.engine.mustDocker(['pause', ...ids]);
  }

  /**
   * The engine's processes besides dockerd (containerd, its shims, whatever runsc runs outside
   * the containers' cgroups): every process whose command line names the lab's directory.
   */
  async enginePids(): Promise<number[]> {
    const out: number[] = [];
    for (const name of await readdir('/proc')) {
      const pid = Number(name);
      if (!Number.isInteger(pid) || pid === this.engine.pid) continue;
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (!cmdline.includes(this.dir)) continue;
      const cgroup = await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '');
      if (!cgroup.includes(`/${this.cgroupParent}/`)) out.push(pid);
    }
    return out;
  }
}

/**
 * An executable that runs runsc with the node's flags (Docker's shim adds --root and the
 * subcommand after them), through the node's rmem_default workaround where the host needs it.
 */
function runscWrapper(host: GvisorHost): string {
  const flags = runscGlobalArgs({
    root: '',
    overlay: 'root:memory',
    network: 'sandbox',
    netDisconnectOk: false,
  }).filter((f) => !f.startsWith('--root='));
  const argv = [host.runscPath, ...flags];
  const command = host.netSysctlQuirk ? wrapForNetSysctlQuirk(argv) : argv;
  return `#!/bin/sh\nexec ${command.map(shellQuote).join(' ')} "$@"\n`;
}

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

function failed(e: unknown): { failed: string } {
  const text = e instanceof Error ? e.message : String(e);
  return { failed: text.split('\n').filter(Boolean).slice(0, 3).join(' | ') };
}

async function attempt(fn: () => Promise<number[]>): Promise<DockerMeasure> {
  try {
    return { ms: await fn() };
  } catch (e) {
    return failed(e);
  }
}

/** The benches' switch: `--docker` (on by default where dockerd can run), `--no-docker`. */
export const DOCKER_OPTIONS = {
  docker: { type: 'boolean' },
  'no-docker': { type: 'boolean' },
} as const;

/** Whether to run the Docker part; `--docker` where Docker cannot run is an error that says why. */
export function dockerWanted(flags: { docker?: boolean; 'no-docker'?: boolean }): boolean {
  if (flags['no-docker']) return false;
  const missing = DockerLab.missing();
  if (flags.docker && missing) throw new Error(`--docker: ${missing}`);
  if (missing) console.error(`no Docker part: ${missing}`);
  return !missing;
}
