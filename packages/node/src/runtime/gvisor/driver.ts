import { closeSync, openSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { listCaptureFiles, readCapture, writeCaptureMeta, CAPTURE_FORMAT } from '../capture.js';
import type {
  Capture,
  CaptureMeta,
  CheckpointOptions,
  DriverAvailability,
  InitProcess,
  ReadOnlyMount,
  Resources,
  RestoreRequest,
  RuntimeDriver,
  SandboxExit,
  SandboxHandle,
  SandboxNet,
  SandboxStats,
  SandboxStatus,
  StartRequest,
} from '../driver.js';
import {
  CaptureInvalidError,
  CheckpointError,
  DriverUnavailableError,
  InvalidRequestError,
  RuntimeOperationError,
  SandboxNotFoundError,
  SandboxStartError,
} from '../errors.js';
import { newSandboxId } from '../ids.js';
import { waitForHealth } from '../readiness.js';
import { cgroupPids, readCgroupUsage, removeCgroups } from './cgroups.js';
import { inspectGvisorHost, type GvisorHost } from './host.js';
import { mountLayers, mountTmpfs, unmountIfMounted } from './mounts.js';
import { buildOciSpec, memoryLimitBytes, resourcesProblem } from './oci-spec.js';
import {
  describeFailure,
  isConnectedStateError,
  runCommand,
  runscGlobalArgs,
  wrapForNetSysctlQuirk,
  type CommandResult,
  type RunscFlags,
} from './runsc.js';

/** Where the sandbox's private writable layer lives (both are inside the checkpoint image). */
export type UpperMedium =
  /** In the sentry's memory (`--overlay2=root:memory`); bounded only by the memory limit. */
  | 'memory'
  /** In a file on a per-sandbox tmpfs of diskSizeMB (`--overlay2=root:dir=`): writes past it get ENOSPC. */
  | 'tmpfs';

export interface GvisorDriverOptions {
  /** Node-local runtime state: runsc's --root and the per-sandbox bundles. */
  readonly runtimeDir?: string;
  readonly runscPath?: string;
  readonly upper?: UpperMedium;
  /** Checkpoint image compression; none is ~40 % faster to save and restore, flate is smaller. */
  readonly compression?: 'none' | 'flate';
  /** Lets a checkpoint drop established external connections (a restored copy of one misbehaves). */
  readonly netDisconnectOk?: boolean;
  /** cgroup directory under each controller that holds one child per sandbox. */
  readonly cgroupParent?: string;
  readonly readyTimeoutMs?: number;
  /** Retries of a checkpoint refused because a connection was still open (the proxy drains them). */
  readonly checkpointRetries?: number;
  readonly monitorIntervalMs?: number;
  /** Delete sandboxes under this runtimeDir left by a previous process (they are orphans). */
  readonly sweepOnInit?: boolean;
}

const DRIVER = 'gvisor';
const DEFAULT_HOSTNAME = 'aenv';
const CMD_TIMEOUT_MS = 60_000;

interface Live {
  handle: SandboxHandle;
  bundle: string;
  cgroupsPath: string;
  flags: RunscFlags;
  layers: readonly string[];
  mounts: readonly ReadOnlyMount[];
  init: InitProcess;
  hostname: string;
  pid: number;
  /** Set once release started, so the monitor does not report an intended stop as a crash. */
  releasing: boolean;
  /** A checkpoint is running; a sandbox that stops during one is handled there, not by the monitor. */
  busy: boolean;
  paused: boolean;
}

/** What a sandbox is booted from, whether fresh or from a capture. */
interface BootPlan {
  layers: readonly string[];
  mounts: readonly ReadOnlyMount[];
  init: InitProcess;
  hostname: string;
  resources: Resources;
  net?: SandboxNet;
  envdPort: number;
  readyTimeoutMs?: number;
  restoredFrom?: string;
}

interface Prepared {
  id: string;
  bundle: string;
  cgroupsPath: string;
  flags: RunscFlags;
  rootfs: string;
}

export class GvisorDriver implements RuntimeDriver {
  readonly name = DRIVER;
  private readonly opts: Required<Omit<GvisorDriverOptions, 'runscPath'>> & { runscPath?: string };
  private host: GvisorHost | null = null;
  private hostPromise: Promise<GvisorHost | { problem: string }> | null = null;
  private readyPromise: Promise<GvisorHost> | null = null;
  private readonly live = new Map<string, Live>();
  private readonly listeners = new Set<(e: SandboxExit) => void>();
  private monitor: NodeJS.Timeout | null = null;

  constructor(options: GvisorDriverOptions = {}) {
    this.opts = {
      runtimeDir: options.runtimeDir ?? '/run/aenv',
      runscPath: options.runscPath,
      upper: options.upper ?? 'memory',
      compression: options.compression ?? 'none',
      netDisconnectOk: options.netDisconnectOk ?? false,
      cgroupParent: options.cgroupParent ?? 'aenv',
      readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
      checkpointRetries: options.checkpointRetries ?? 5,
      monitorIntervalMs: options.monitorIntervalMs ?? 1000,
      sweepOnInit: options.sweepOnInit ?? true,
    };
  }

  private get runscRoot(): string {
    return join(this.opts.runtimeDir, 'runsc');
  }

  private bundleDir(id: string): string {
    return join(this.opts.runtimeDir, 'sandboxes', id);
  }

  async probe(): Promise<DriverAvailability> {
    const h = await this.inspect();
    return 'problem' in h
      ? { available: false, reason: h.problem }
      : { available: true, version: h.runscVersion };
  }

  private inspect(): Promise<GvisorHost | { problem: string }> {
    this.hostPromise ??= inspectGvisorHost(this.opts.runscPath);
    return this.hostPromise;
  }

  /**
   * Host facts, checked once; the first call also sweeps orphans and starts the crash monitor.
   * Every caller waits for that first call: a sandbox prepared while the sweep runs would look
   * like an orphan to it.
   */
  private ready(): Promise<GvisorHost> {
    this.readyPromise ??= this.initialize().catch((e: unknown) => {
      this.readyPromise = null;
      throw e;
    });
    return this.readyPromise;
  }

  private async initialize(): Promise<GvisorHost> {
    const h = await this.inspect();
    if ('problem' in h) throw new DriverUnavailableError(h.problem);
    this.host = h;
    await mkdir(this.runscRoot, { recursive: true, mode: 0o700 });
    await mkdir(join(this.opts.runtimeDir, 'sandboxes'), { recursive: true, mode: 0o700 });
    if (this.opts.sweepOnInit) await this.sweepOrphans();
    this.monitor = setInterval(() => void this.checkLiveness(), this.opts.monitorIntervalMs);
    this.monitor.unref();
    return h;
  }

  async prepare(): Promise<void> {
    await this.ready();
  }

  // ---------------------------------------------------------------- lifecycle

  async start(req: StartRequest): Promise<SandboxHandle> {
    const host = await this.ready();
    this.validate(req.resources, req.layers, req.mounts ?? [], req.envdPort);
    await this.checkPaths(req.layers, req.mounts ?? []);
    return this.boot(host, 'runsc run', (p) => ['run', '--bundle', p.bundle, '--detach', p.id], {
      layers: req.layers,
      mounts: req.mounts ?? [],
      init: req.init,
      hostname: req.hostname ?? DEFAULT_HOSTNAME,
      resources: req.resources,
      net: req.net,
      envdPort: req.envdPort,
      readyTimeoutMs: req.readyTimeoutMs,
    });
  }

  async restore(req: RestoreRequest): Promise<SandboxHandle> {
    const host = await this.ready();
    const capture =
      typeof req.capture === 'string' ? await readCapture(req.capture) : await readCapture(req.capture.dir);
    const meta = capture.meta;
    if (meta.driver !== DRIVER) throw new CaptureInvalidError(`capture was made by driver ${meta.driver}`);
    if (meta.runtimeVersion !== host.runscVersion) {
      throw new CaptureInvalidError(
        `capture was made by runsc ${meta.runtimeVersion}; this host runs ${host.runscVersion} (images only restore under the same build)`,
      );
    }
    if ((meta.settings.upper ?? 'memory') !== this.opts.upper) {
      throw new CaptureInvalidError(
        `capture's writable layer is in ${meta.settings.upper}; this driver uses ${this.opts.upper}`,
      );
    }
    this.validate(req.resources, meta.layers, meta.mounts, meta.envdPort);
    await this.checkPaths(meta.layers, meta.mounts).catch((e: Error) => {
      throw new CaptureInvalidError(`capture ${capture.dir} cannot be restored here: ${e.message}`);
    });
    return this.boot(
      host,
      'runsc restore',
      (p) => ['restore', '--image-path', capture.dir, '--bundle', p.bundle, '--detach', p.id],
      {
        layers: meta.layers,
        mounts: meta.mounts,
        init: meta.init,
        hostname: meta.hostname,
        resources: req.resources,
        net: req.net,
        envdPort: meta.envdPort,
        readyTimeoutMs: req.readyTimeoutMs,
        restoredFrom: capture.dir,
      },
    );
  }

  /** Bundle, spec, runsc run/restore, then readiness; on any failure everything is released. */
  private async boot(
    host: GvisorHost,
    what: string,
    runscArgs: (p: Prepared) => string[],
    x: BootPlan,
  ): Promise<SandboxHandle> {
    const p = await this.prepareBundle(x.layers, x.resources, x.net);
    try {
      await this.writeSpec(p, x.init, x.mounts, x.resources, x.net, x.hostname);
      await this.launch(host, p, runscArgs(p), x.net, what);
      return await this.becomeLive(p, x);
    } catch (e) {
      await this.release(p.id, p);
      throw e;
    }
  }

  async checkpoint(handle: SandboxHandle, opts: CheckpointOptions): Promise<Capture> {
    const host = await this.ready();
    const s = this.get(handle);
    if (
      await stat(opts.dir).then(
        () => true,
        () => false,
      )
    ) {
      throw new InvalidRequestError(`capture directory ${opts.dir} already exists`);
    }
    const partial = `${opts.dir}.partial-${randomBytes(4).toString('hex')}`;
    await mkdir(partial, { recursive: true });
    s.busy = true;
    try {
      const args = [
        'checkpoint',
        '--image-path',
        partial,
        `--compression=${this.opts.compression}`,
        ...(opts.leaveRunning ? ['--leave-running'] : []),
        s.handle.id,
      ];
      let r: CommandResult | null = null;
      for (let attempt = 0; attempt <= this.opts.checkpointRetries; attempt++) {
        if (attempt > 0) await new Promise((res) => setTimeout(res, 50 * 2 ** attempt));
        r = await this.runsc(s.flags, args);
        if (r.code === 0 || !isConnectedStateError(r.stderr + r.stdout)) break;
        await rm(partial, { recursive: true, force: true });
        await mkdir(partial, { recursive: true });
      }
      if (!r || r.code !== 0) {
        const detail = r ? (r.stderr || r.stdout).trim() : '';
        if (!(await this.alive(s))) {
          await this.releaseLive(s, 'sandbox died during a failed checkpoint');
          throw new CheckpointError(`checkpoint of ${s.handle.id} failed and the sandbox died`, detail);
        }
        throw new CheckpointError(
          r ? describeFailure('runsc checkpoint', r) : 'checkpoint not attempted',
          detail,
        );
      }
      const meta: CaptureMeta = {
        format: CAPTURE_FORMAT,
        driver: DRIVER,
        runtimeVersion: host.runscVersion,
        createdAt: new Date().toISOString(),
        sourceId: s.handle.id,
        resources: s.handle.resources,
        layers: s.layers,
        mounts: s.mounts,
        init: s.init,
        envdPort: s.handle.envdPort,
        hostname: s.hostname,
        settings: { upper: this.opts.upper, compression: this.opts.compression },
        files: await listCaptureFiles(partial),
      };
      await writeCaptureMeta(partial, meta);
      await rename(partial, opts.dir);
      if (!opts.leaveRunning) await this.releaseLive(s, null);
      return { dir: opts.dir, meta };
    } catch (e) {
      await rm(partial, { recursive: true, force: true });
      if (e instanceof CheckpointError || e instanceof InvalidRequestError) throw e;
      throw new CheckpointError(`checkpoint of ${s.handle.id} failed: ${(e as Error).message}`, undefined, {
        cause: e,
      });
    } finally {
      s.busy = false;
    }
  }

  async pause(handle: SandboxHandle): Promise<void> {
    const s = this.get(handle);
    await this.runscOrThrow(s, ['pause', s.handle.id], 'runsc pause');
    s.paused = true;
  }

  async resume(handle: SandboxHandle): Promise<void> {
    const s = this.get(handle);
    await this.runscOrThrow(s, ['resume', s.handle.id], 'runsc resume');
    s.paused = false;
  }

  async kill(handle: SandboxHandle): Promise<void> {
    await this.ready();
    const s = this.live.get(handle.id);
    if (s) return this.releaseLive(s, null);
    // Not ours (or already released): still make sure nothing with this id is left.
    await this.release(handle.id, null);
  }

  async stats(handle: SandboxHandle): Promise<SandboxStats> {
    const host = await this.ready();
    const s = this.get(handle);
    const u = await readCgroupUsage(host.cgroups, s.cgroupsPath);
    let diskBytes: number | null = null;
    if (this.opts.upper === 'tmpfs') {
      const fs = await statfs(join(s.bundle, 'upper')).catch(() => null);
      if (fs) diskBytes = (fs.blocks - fs.bfree) * fs.bsize;
    }
    return {
      cpuNs: u.cpuNs ?? 0,
      memoryBytes: u.memoryBytes ?? 0,
      memoryLimitBytes:
        u.memoryLimitBytes ?? memoryLimitBytes(s.handle.resources, this.opts.upper === 'memory'),
      diskBytes,
      pids: u.pids,
    };
  }

  async status(handle: SandboxHandle): Promise<SandboxStatus> {
    const s = this.live.get(handle.id);
    if (!s) return 'stopped';
    if (!(await this.alive(s))) return 'stopped';
    return s.paused ? 'paused' : 'running';
  }

  /** Host pids of a sandbox's processes (sentry, gofer), e.g. to measure its PSS. */
  async processIds(handle: SandboxHandle): Promise<number[]> {
    const host = await this.ready();
    return cgroupPids(host.cgroups, this.get(handle).cgroupsPath);
  }

  onExit(listener: (exit: SandboxExit) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.monitor) clearInterval(this.monitor);
    this.monitor = null;
    await Promise.all([...this.live.values()].map((s) => this.releaseLive(s, null)));
  }

  // ---------------------------------------------------------------- internals

  private get(handle: SandboxHandle): Live {
    const s = this.live.get(handle.id);
    if (!s || s.releasing) throw new SandboxNotFoundError(handle.id);
    return s;
  }

  private validate(
    r: Resources,
    layers: readonly string[],
    mounts: readonly ReadOnlyMount[],
    port: number,
  ): void {
    const problem = resourcesProblem(r);
    if (problem) throw new InvalidRequestError(problem);
    if (layers.length === 0)
      throw new InvalidRequestError('a sandbox needs at least one root filesystem layer');
    for (const m of mounts) {
      if (!m.sandboxPath.startsWith('/'))
        throw new InvalidRequestError(`mount target ${m.sandboxPath} is not absolute`);
    }
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new InvalidRequestError(`bad envd port ${port}`);
  }

  private async checkPaths(layers: readonly string[], mounts: readonly ReadOnlyMount[]): Promise<void> {
    for (const dir of [...layers, ...mounts.map((m) => m.hostPath)]) {
      const st = await stat(dir).catch(() => null);
      if (!st?.isDirectory()) throw new InvalidRequestError(`${dir} is not a directory`);
    }
  }

  /** Creates the bundle directory, the root filesystem view and the writable layer's store. */
  private async prepareBundle(
    layers: readonly string[],
    resources: Resources,
    net?: SandboxNet,
  ): Promise<Prepared> {
    const id = newSandboxId();
    const bundle = this.bundleDir(id);
    await mkdir(bundle, { recursive: true, mode: 0o700 });
    const p: Prepared = {
      id,
      bundle,
      cgroupsPath: `/${this.opts.cgroupParent}/${id}`,
      flags: {
        root: this.runscRoot,
        overlay: this.opts.upper === 'memory' ? 'root:memory' : `root:dir=${join(bundle, 'upper')}`,
        network: net ? 'sandbox' : 'none',
        netDisconnectOk: this.opts.netDisconnectOk,
      },
      rootfs: layers[0] ?? '',
    };
    try {
      if (layers.length > 1) {
        p.rootfs = join(bundle, 'rootfs');
        await mkdir(p.rootfs);
        await mountLayers(layers, p.rootfs);
      }
      if (this.opts.upper === 'tmpfs') {
        await mkdir(join(bundle, 'upper'));
        await mountTmpfs(join(bundle, 'upper'), resources.diskSizeMB);
      }
    } catch (e) {
      await this.release(id, p);
      throw new SandboxStartError('start_failed', `preparing sandbox ${id} failed: ${(e as Error).message}`);
    }
    return p;
  }

  private async writeSpec(
    p: Prepared,
    init: InitProcess,
    mounts: readonly ReadOnlyMount[],
    resources: Resources,
    net: SandboxNet | undefined,
    hostname: string,
  ): Promise<void> {
    const spec = buildOciSpec({
      rootfs: p.rootfs,
      init,
      mounts,
      resources,
      netnsPath: net?.netnsPath,
      hostname,
      cgroupsPath: p.cgroupsPath,
      upperInMemory: this.opts.upper === 'memory',
    });
    await writeFile(join(p.bundle, 'config.json'), JSON.stringify(spec, null, 2));
  }

  /**
   * Runs `runsc run|restore --detach`. Its stdout/stderr (and the sandbox's, which inherits them)
   * go to a file in the bundle: pipes would stay open for the sandbox's whole life.
   */
  private async launch(
    host: GvisorHost,
    p: Prepared,
    args: string[],
    net: SandboxNet | undefined,
    what: string,
  ) {
    let argv = [host.runscPath, ...runscGlobalArgs(p.flags), ...args];
    if (net && host.netSysctlQuirk) argv = wrapForNetSysctlQuirk(argv);
    const logPath = join(p.bundle, 'console.log');
    const fd = openSync(logPath, 'a', 0o600);
    let r: CommandResult;
    try {
      r = await runCommand(argv, { timeoutMs: CMD_TIMEOUT_MS, stdoutFd: fd });
    } finally {
      closeSync(fd);
    }
    if (r.code !== 0) {
      const log = await readFile(logPath, 'utf8').catch(() => '');
      const tail = log.trim().split('\n').slice(-5).join('\n');
      const code = args[0] === 'restore' ? 'restore_failed' : 'start_failed';
      throw new SandboxStartError(code, `${describeFailure(what, r)}${tail ? `: ${tail}` : ''}`, log);
    }
  }

  private async becomeLive(p: Prepared, x: BootPlan): Promise<SandboxHandle> {
    const pid = await this.sandboxPid(p);
    const s: Live = {
      handle: { id: p.id, driver: DRIVER, resources: x.resources, envdPort: x.envdPort, readyAt: 0 },
      bundle: p.bundle,
      cgroupsPath: p.cgroupsPath,
      flags: p.flags,
      layers: x.layers,
      mounts: x.mounts,
      init: x.init,
      hostname: x.hostname,
      pid,
      releasing: false,
      busy: false,
      paused: false,
    };
    if (x.net) {
      const notReady = await waitForHealth(x.net.hostAddress, x.envdPort, {
        timeoutMs: x.readyTimeoutMs ?? this.opts.readyTimeoutMs,
        dead: async () => ((await this.alive(s)) ? null : 'the sandbox exited before envd became healthy'),
      });
      if (notReady) {
        const log = await readFile(join(p.bundle, 'console.log'), 'utf8').catch(() => '');
        throw new SandboxStartError('not_ready', `sandbox ${p.id}: ${notReady}`, log);
      }
    }
    s.handle = {
      ...s.handle,
      readyAt: Date.now(),
      ...(x.net ? { net: x.net } : {}),
      ...(x.restoredFrom ? { restoredFrom: x.restoredFrom } : {}),
    };
    this.live.set(p.id, s);
    return s.handle;
  }

  private async sandboxPid(p: Prepared): Promise<number> {
    const r = await this.runsc(p.flags, ['state', p.id]);
    const pid = r.code === 0 ? (JSON.parse(r.stdout) as { pid?: number }).pid : undefined;
    if (!pid) throw new SandboxStartError('start_failed', describeFailure(`runsc state ${p.id}`, r));
    return pid;
  }

  private runsc(flags: RunscFlags, args: string[]): Promise<CommandResult> {
    const runscPath = this.host?.runscPath ?? 'runsc';
    return runCommand([runscPath, ...runscGlobalArgs(flags), ...args], { timeoutMs: CMD_TIMEOUT_MS });
  }

  private async runscOrThrow(s: Live, args: string[], what: string): Promise<void> {
    const r = await this.runsc(s.flags, args);
    if (r.code !== 0) throw new RuntimeOperationError(describeFailure(what, r), r.stderr);
  }

  private async alive(s: Live): Promise<boolean> {
    try {
      process.kill(s.pid, 0);
    } catch {
      return false;
    }
    // A zombie still answers kill(0); its state letter says it is gone.
    const st = await readFile(`/proc/${s.pid}/stat`, 'utf8').catch(() => '');
    return st !== '' && !/^\d+ \(.*\) [ZX] /.test(st);
  }

  private async releaseLive(s: Live, crashReason: string | null): Promise<void> {
    if (s.releasing) return;
    s.releasing = true;
    try {
      await this.release(s.handle.id, { bundle: s.bundle, cgroupsPath: s.cgroupsPath, flags: s.flags });
    } finally {
      this.live.delete(s.handle.id);
    }
    if (crashReason) for (const l of this.listeners) l({ id: s.handle.id, reason: crashReason });
  }

  /**
   * Releases everything a sandbox id may hold, whatever state it got to: runsc's container and
   * state files, its processes (delete --force kills them), cgroups, mounts and the bundle.
   */
  private async release(
    id: string,
    p: Pick<Prepared, 'bundle' | 'cgroupsPath' | 'flags'> | null,
  ): Promise<void> {
    const flags = p?.flags ?? {
      root: this.runscRoot,
      overlay: 'root:memory',
      network: 'none' as const,
      netDisconnectOk: false,
    };
    await this.runsc(flags, ['delete', '--force', id]).catch(() => null);
    const bundle = p?.bundle ?? this.bundleDir(id);
    const cgroupsPath = p?.cgroupsPath ?? `/${this.opts.cgroupParent}/${id}`;
    if (this.host) {
      // Killed processes may take a moment to leave the cgroup; only an empty one can be removed.
      for (let i = 0; i < 20 && (await removeCgroups(this.host.cgroups, cgroupsPath)).length > 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await unmountIfMounted(join(bundle, 'upper')).catch(() => null);
    await unmountIfMounted(join(bundle, 'rootfs')).catch(() => null);
    await rm(bundle, { recursive: true, force: true }).catch(() => null);
  }

  /** Reports and releases sandboxes whose sandbox process is gone (runsc or envd crashed). */
  private async checkLiveness(): Promise<void> {
    for (const s of [...this.live.values()]) {
      if (s.releasing || s.busy) continue;
      if (!(await this.alive(s))) {
        await this.releaseLive(s, 'the sandbox process exited (runtime or envd crashed)').catch(() => null);
      }
    }
  }

  /** Deletes every container in this driver's runsc root that it does not know. */
  private async sweepOrphans(): Promise<void> {
    const r = await this.runsc(
      { root: this.runscRoot, overlay: 'root:memory', network: 'none', netDisconnectOk: false },
      ['list', '--format=json'],
    );
    let ids: string[] = [];
    try {
      ids = ((JSON.parse(r.stdout || '[]') ?? []) as { id: string }[]).map((c) => c.id);
    } catch {
      ids = [];
    }
    const bundles = await readdir(join(this.opts.runtimeDir, 'sandboxes')).catch(() => [] as string[]);
    for (const id of new Set([...ids, ...bundles])) if (!this.live.has(id)) await this.release(id, null);
  }
}
