import { mkdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { CaptureInvalidError, readCapture } from '@agentenv/snapshot';
import type {
  Capture,
  CheckpointOptions,
  CpuUse,
  DriverAvailability,
  ReleasingSandbox,
  RestoreRequest,
  RuntimeDriver,
  SandboxExit,
  SandboxHandle,
  SandboxStats,
  SandboxStatus,
  StartRequest,
} from '../driver.js';
import {
  CheckpointError,
  DriverUnavailableError,
  RuntimeOperationError,
  SandboxNotFoundError,
  SandboxStartError,
} from '../errors.js';
import { waitForHealth } from '../readiness.js';
import {
  checkPaths,
  consoleLog,
  createBundle,
  launch,
  validateBoot,
  writeSpec,
  type BootPlan,
  type Bundle,
} from './bundle.js';
import {
  cgroupPids,
  ensureCpusetParent,
  readCgroupCpuUse,
  readCgroupUsage,
  removeCgroups,
  setFrozen,
  thawChildren,
} from './cgroups.js';
import { checkpointInto, checkRestorable, type CaptureSource, type CheckpointRun } from './checkpoint.js';
import { inspectGvisorHost, type GvisorHost } from './host.js';
import { withDefaults, type DriverSettings, type GvisorDriverOptions } from './options.js';
import { DriverLayout } from './layout.js';
import { LivenessMonitor, sweepOrphans } from './liveness.js';
import { memoryLimitBytes } from './oci-spec.js';
import { CpuPlacer, hostCpus } from './cpusets.js';
import { isRunning, pssBytes } from './processes.js';
import {
  describeFailure,
  runCommand,
  runscGlobalArgs,
  type CommandResult,
  type RunscFlags,
} from './runsc.js';
import { openPageMerging, type PageMerging } from './page-merging.js';
import { clearSuspended, markSuspended, readSuspended } from './suspend.js';
import { Reclaimer } from './teardown.js';
import { checkVolumes, restoreVolumes } from './volumes.js';

export type { UpperMedium } from './bundle.js';
export type { GvisorDriverOptions } from './options.js';

const DRIVER = 'gvisor';
const DEFAULT_HOSTNAME = 'aenv';
const CMD_TIMEOUT_MS = 60_000;

interface Live {
  handle: SandboxHandle;
  bundle: Bundle;
  source: CaptureSource;
  pid: number;
  cpus: number[] | undefined;
  state: 'running' | 'paused' | 'frozen';
  /** Set once release started, so the monitor does not report an intended stop as a crash. */
  releasing: boolean;
  /** A checkpoint is running; a sandbox that stops during one is handled there, not by the monitor. */
  busy: boolean;
}

export class GvisorDriver implements RuntimeDriver {
  readonly name = DRIVER;
  private readonly opts: DriverSettings;
  private readonly layout: DriverLayout;
  private readonly reclaimer: Reclaimer;
  private readonly monitor: LivenessMonitor;
  private host: GvisorHost | null = null;
  private placer: CpuPlacer | null = null;
  private merging: PageMerging | null = null;
  private hostPromise: Promise<GvisorHost | { problem: string }> | null = null;
  private readyPromise: Promise<GvisorHost> | null = null;
  private readonly live = new Map<string, Live>();
  private readonly listeners = new Set<(e: SandboxExit) => void>();

  constructor(options: GvisorDriverOptions = {}) {
    this.opts = withDefaults(options);
    this.layout = new DriverLayout(this.opts.runtimeDir, this.opts.cgroupParent);
    this.reclaimer = new Reclaimer(this.layout, () => this.host);
    this.monitor = new LivenessMonitor(
      () =>
        [...this.live.values()].map((s) => ({
          id: s.handle.id,
          pid: s.pid,
          quiet: s.releasing || s.busy,
          frozen: s.state === 'frozen',
        })),
      async (id) => {
        const s = this.live.get(id);
        if (s) await this.releaseLive(s, 'the sandbox process exited (runtime or envd crashed)');
      },
    );
  }

  async probe(): Promise<DriverAvailability> {
    const h = await this.inspect();
    return 'problem' in h
      ? { available: false, reason: h.problem }
      : { available: true, version: h.runscVersion };
  }

  private inspect(): Promise<GvisorHost | { problem: string }> {
    this.hostPromise ??= inspectGvisorHost(this.opts.runscPath, this.opts.reaperPath);
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
    if (this.opts.mergePages) this.merging = await openPageMerging(h, this.opts.runtimeDir);
    if (this.opts.cpuPlacement === 'spread') this.placer = new CpuPlacer(await hostCpus());
    await mkdir(this.layout.runscRoot, { recursive: true, mode: 0o700 });
    await mkdir(this.layout.sandboxesDir, { recursive: true, mode: 0o700 });
    if (this.opts.sweepOnInit) await this.sweepOrphans(h);
    this.monitor.start(this.opts.monitorIntervalMs);
    return h;
  }

  async prepare(): Promise<void> {
    await this.ready();
  }

  // ---------------------------------------------------------------- lifecycle

  async start(req: StartRequest): Promise<SandboxHandle> {
    const host = await this.ready();
    validateBoot(req.resources, req.layers, req.mounts ?? [], req.envdPort);
    await checkPaths(req.layers, req.mounts ?? []);
    await checkVolumes(req.volumes ?? []);
    return this.boot(host, 'runsc run', (b) => ['run', '--bundle', b.dir], {
      layers: req.layers,
      mounts: req.mounts ?? [],
      volumes: req.volumes ?? [],
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
    const capture = await readCapture(typeof req.capture === 'string' ? req.capture : req.capture.dir);
    const meta = capture.meta;
    checkRestorable(meta, { driver: DRIVER, runtimeVersion: host.runscVersion, upper: this.opts.upper });
    validateBoot(req.resources, meta.layers, meta.mounts, meta.envdPort);
    await checkPaths(meta.layers, meta.mounts).catch((e: Error) => {
      throw new CaptureInvalidError(`capture ${capture.dir} cannot be restored here: ${e.message}`);
    });
    const volumes = restoreVolumes(meta, req.volumes ?? []);
    await checkVolumes(volumes);
    return this.boot(
      host,
      'runsc restore',
      (b) => ['restore', '--image-path', capture.dir, '--bundle', b.dir],
      {
        layers: meta.layers,
        mounts: meta.mounts,
        volumes,
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
    runscArgs: (b: Bundle) => string[],
    plan: BootPlan,
  ): Promise<SandboxHandle> {
    const upper = this.opts.upper;
    const b = await createBundle(
      this.layout,
      plan,
      { upper, netDisconnectOk: this.opts.netDisconnectOk },
      (x) => this.reclaimer.release(x.id, x),
    );
    const cpus = this.placer?.place(plan.resources.cpuCount);
    try {
      if (cpus) await ensureCpusetParent(host.cgroups, this.opts.cgroupParent);
      await writeSpec(b, plan, { upperInMemory: upper === 'memory', ...(cpus ? { cpus } : {}) });
      const pid = await launch(host, b, runscArgs(b), what, this.merging !== null);
      void this.merging?.changed();
      return await this.becomeLive(b, plan, pid, cpus);
    } catch (e) {
      this.placer?.release(cpus);
      await this.reclaimer.release(b.id, b);
      throw e;
    }
  }

  private async becomeLive(
    b: Bundle,
    plan: BootPlan,
    pid: number,
    cpus: number[] | undefined,
  ): Promise<SandboxHandle> {
    const handle: SandboxHandle = {
      id: b.id,
      driver: DRIVER,
      resources: plan.resources,
      envdPort: plan.envdPort,
      readyAt: 0,
    };
    if (plan.net) {
      const notReady = await waitForHealth(plan.net.hostAddress, plan.envdPort, {
        timeoutMs: plan.readyTimeoutMs ?? this.opts.readyTimeoutMs,
        dead: async () => ((await isRunning(pid)) ? null : 'the sandbox exited before envd became healthy'),
      });
      if (notReady)
        throw new SandboxStartError('not_ready', `sandbox ${b.id}: ${notReady}`, await consoleLog(b));
    }
    const ready: SandboxHandle = {
      ...handle,
      readyAt: Date.now(),
      ...(plan.net ? { net: plan.net } : {}),
      ...(plan.restoredFrom ? { restoredFrom: plan.restoredFrom } : {}),
    };
    const source = {
      handle: ready,
      layers: plan.layers,
      mounts: plan.mounts,
      volumes: plan.volumes,
      init: plan.init,
      hostname: plan.hostname,
    };
    this.live.set(b.id, {
      handle: ready,
      bundle: b,
      source,
      pid,
      cpus,
      state: 'running',
      releasing: false,
      busy: false,
    });
    return ready;
  }

  async checkpoint(handle: SandboxHandle, opts: CheckpointOptions): Promise<Capture> {
    const host = await this.ready();
    const s = this.get(handle);
    const wasFrozen = s.state === 'frozen';
    s.busy = true;
    try {
      if (wasFrozen) await this.setState(s, 'running');
      const capture = await checkpointInto(s.source, opts, this.checkpointRun(host, s.bundle.flags));
      await clearSuspended(s.bundle.dir);
      if (!opts.leaveRunning) await this.releaseLive(s, null, true);
      else if (wasFrozen) await this.setState(s, 'frozen');
      return capture;
    } catch (e) {
      if (!(e instanceof CheckpointError) || (await isRunning(s.pid))) throw e;
      await this.releaseLive(s, 'sandbox died during a failed checkpoint');
      throw new CheckpointError(`checkpoint of ${s.handle.id} failed and the sandbox died`, e.detail);
    } finally {
      s.busy = false;
    }
  }

  async pause(handle: SandboxHandle): Promise<void> {
    const s = this.get(handle);
    if (s.state === 'frozen') await this.setState(s, 'running');
    await this.runscOrThrow(s, ['pause', s.handle.id], 'runsc pause');
    s.state = 'paused';
  }

  async resume(handle: SandboxHandle): Promise<void> {
    const s = this.get(handle);
    if (s.state === 'frozen') await this.setState(s, 'running');
    await this.runscOrThrow(s, ['resume', s.handle.id], 'runsc resume');
    s.state = 'running';
    await clearSuspended(s.bundle.dir);
  }

  async suspend(handle: SandboxHandle, captureDir: string): Promise<void> {
    const s = this.get(handle);
    await markSuspended(s.bundle.dir, { captureDir, source: s.source, flags: s.bundle.flags });
    try {
      await this.pause(handle);
    } catch (e) {
      await clearSuspended(s.bundle.dir);
      throw e;
    }
  }

  async freeze(handle: SandboxHandle): Promise<void> {
    const s = this.get(handle);
    if (s.state !== 'frozen') await this.setState(s, 'frozen');
  }

  async thaw(handle: SandboxHandle): Promise<void> {
    const s = this.get(handle);
    if (s.state === 'frozen') await this.setState(s, 'running');
  }

  /** Freezes or thaws through the cgroup; `running` here means "not frozen" (a paused one stays paused). */
  private async setState(s: Live, to: 'frozen' | 'running'): Promise<void> {
    const host = await this.ready();
    try {
      await setFrozen(host.cgroups, s.bundle.cgroupsPath, to === 'frozen');
    } catch (e) {
      throw new RuntimeOperationError(
        `${to === 'frozen' ? 'freezing' : 'thawing'} ${s.handle.id} failed`,
        String(e),
      );
    }
    s.state = to;
  }

  async kill(handle: SandboxHandle): Promise<void> {
    await this.ready();
    const s = this.live.get(handle.id);
    if (s) return this.releaseLive(s, null);
    // Not ours (or already released): still make sure nothing with this id is left.
    await this.reclaimer.stopThenReclaim(handle.id, null, null, null);
  }

  released(id: string): Promise<void> {
    return this.reclaimer.released(id);
  }

  releasing(): readonly ReleasingSandbox[] {
    return this.reclaimer.releasing();
  }

  async cpuUse(handle: SandboxHandle, opts: { threads?: boolean } = {}): Promise<CpuUse | null> {
    const host = await this.ready();
    return readCgroupCpuUse(host.cgroups, this.get(handle).bundle.cgroupsPath, opts.threads ?? true);
  }

  async stats(handle: SandboxHandle): Promise<SandboxStats> {
    const host = await this.ready();
    const s = this.get(handle);
    const u = await readCgroupUsage(host.cgroups, s.bundle.cgroupsPath);
    let diskBytes: number | null = null;
    if (this.opts.upper === 'tmpfs') {
      const fs = await statfs(join(s.bundle.dir, 'upper')).catch(() => null);
      if (fs) diskBytes = (fs.blocks - fs.bfree) * fs.bsize;
    }
    return {
      cpuNs: u.cpuNs ?? 0,
      memoryBytes: u.memoryBytes ?? 0,
      workingSetBytes: u.workingSetBytes ?? u.memoryBytes ?? 0,
      pssBytes: await pssBytes(await cgroupPids(host.cgroups, s.bundle.cgroupsPath)),
      memoryLimitBytes:
        u.memoryLimitBytes ?? memoryLimitBytes(s.handle.resources, this.opts.upper === 'memory'),
      diskBytes,
      pids: u.pids,
    };
  }

  async status(handle: SandboxHandle): Promise<SandboxStatus> {
    const s = this.live.get(handle.id);
    if (!s || s.releasing || !(await isRunning(s.pid))) return 'stopped';
    return s.state;
  }

  /** Host pids of a sandbox's processes (sentry, gofer, stubs), e.g. to measure its PSS. */
  async processIds(handle: SandboxHandle): Promise<number[]> {
    const host = await this.ready();
    return cgroupPids(host.cgroups, this.get(handle).bundle.cgroupsPath);
  }

  /** Host CPUs each sandbox is pinned to (cpuPlacement `spread`); absent: not pinned. */
  cpusOf(handle: SandboxHandle): readonly number[] | undefined {
    return this.live.get(handle.id)?.cpus;
  }

  onExit(listener: (exit: SandboxExit) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.monitor.stop();
    await Promise.all([...this.live.values()].map((s) => this.releaseLive(s, null)));
    await this.reclaimer.drain();
    await this.merging?.close();
    // The per-node parent runsc made (left when another process of this node still has sandboxes).
    if (this.host) await removeCgroups(this.host.cgroups, `/${this.opts.cgroupParent}`);
  }

  // ---------------------------------------------------------------- internals

  private get(handle: SandboxHandle): Live {
    const s = this.live.get(handle.id);
    if (!s || s.releasing) throw new SandboxNotFoundError(handle.id);
    return s;
  }

  private runsc(flags: RunscFlags, args: string[]): Promise<CommandResult> {
    const runscPath = this.host?.runscPath ?? 'runsc';
    return runCommand([runscPath, ...runscGlobalArgs(flags), ...args], { timeoutMs: CMD_TIMEOUT_MS });
  }

  private checkpointRun(host: GvisorHost, flags: RunscFlags): CheckpointRun {
    return {
      driver: DRIVER,
      runtimeVersion: host.runscVersion,
      settings: { upper: this.opts.upper },
      compression: this.opts.compression,
      retries: this.opts.checkpointRetries,
      runsc: (args) => this.runsc(flags, args),
    };
  }

  private async runscOrThrow(s: Live, args: string[], what: string): Promise<void> {
    const r = await this.runsc(s.bundle.flags, args);
    if (r.code !== 0) throw new RuntimeOperationError(describeFailure(what, r), r.stderr);
  }

  /**
   * Stops the sandbox now and reclaims the rest in the background; a crash is reported after.
   * `exiting`: a checkpoint stopped it already, and its processes are left to exit in the background.
   */
  private async releaseLive(s: Live, crashReason: string | null, exiting = false): Promise<void> {
    if (s.releasing) return;
    s.releasing = true;
    this.live.delete(s.handle.id);
    this.placer?.release(s.cpus);
    await this.reclaimer.stopThenReclaim(s.handle.id, s.bundle, s.pid, s.handle.resources, exiting);
    if (crashReason) for (const l of this.listeners) l({ id: s.handle.id, reason: crashReason });
  }

  /** Releases every container and bundle in this driver's runtime dir that it does not know. */
  private async sweepOrphans(host: GvisorHost): Promise<void> {
    await sweepOrphans(this.layout, {
      thawAll: async () => void (await thawChildren(host.cgroups, this.opts.cgroupParent)),
      list: () => this.runsc(this.layout.rootFlags(), ['list', '--format=json']),
      known: (id) => this.live.has(id),
      release: (id) => this.reclaimer.release(id, null),
      finishSuspended: (id) => this.finishSuspended(host, id),
    });
  }

  /**
   * The checkpoint a sandbox suspended by the previous process was owed, taken now (its pause
   * answered before it). A failure leaves no capture, and recovery reports the sandbox lost.
   */
  private async finishSuspended(host: GvisorHost, id: string): Promise<void> {
    const owed = await readSuspended(this.layout.bundleDir(id)).catch(() => undefined);
    if (!owed) return;
    await checkpointInto(
      owed.source,
      { dir: owed.captureDir, leaveRunning: false },
      this.checkpointRun(host, owed.flags),
    ).catch(() => undefined);
  }
}
