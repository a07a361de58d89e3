import {
  CheckpointError,
  InvalidRequestError,
  RuntimeError,
  RuntimeOperationError,
  SandboxNotFoundError,
  SandboxStartError,
  type Capture,
  type CheckpointOptions,
  type CpuUse,
  type DriverAvailability,
  type ReleasingSandbox,
  type RestoreRequest,
  type RuntimeDriver,
  type SandboxExit,
  type SandboxHandle,
  type SandboxStats,
  type SandboxStatus,
  type StartRequest,
} from '@agentenv/node';
import { CaptureInvalidError } from '@agentenv/snapshot';
import { fakeCaptureMeta, FakeDisk } from './disk.js';
import { Faults } from './faults.js';

export type DriverStep =
  'start' | 'restore' | 'checkpoint' | 'kill' | 'pause' | 'resume' | 'freeze' | 'thaw' | 'stats' | 'cpuUse';

interface FakeSandbox {
  handle: SandboxHandle;
  status: SandboxStatus;
  state: Record<string, string>;
  /** CPU time its processes used, ns: what a test says it burned (runCpu). */
  cpuNs: number;
  /** How long its one thread was runnable, ns (runCpu and starveCpu). */
  runnableNs: number;
}

const STEP_ERROR: Record<DriverStep, (step: DriverStep) => RuntimeError> = {
  start: () => new SandboxStartError('start_failed', 'fake: the sandbox did not start'),
  restore: () => new RuntimeError('restore_failed', 'fake: the restore failed'),
  checkpoint: () => new CheckpointError('fake: the checkpoint failed'),
  kill: (s) => new RuntimeOperationError(`fake: ${s} failed`),
  pause: (s) => new RuntimeOperationError(`fake: ${s} failed`),
  resume: (s) => new RuntimeOperationError(`fake: ${s} failed`),
  freeze: (s) => new RuntimeOperationError(`fake: ${s} failed`),
  thaw: (s) => new RuntimeOperationError(`fake: ${s} failed`),
  stats: (s) => new RuntimeOperationError(`fake: ${s} failed`),
  cpuUse: (s) => new RuntimeOperationError(`fake: ${s} failed`),
};

/**
 * A runtime driver that keeps sandboxes as objects: each has a status and a state (keys and
 * values standing for its memory and files) that checkpoints copy into captures on a FakeDisk and
 * restores copy back. `faults` makes any step fail or wait; `crash()` makes a sandbox die on its
 * own, as the runtime reports it.
 */
export class FakeDriver implements RuntimeDriver {
  readonly name = 'fake';
  readonly faults = new Faults<DriverStep>((s) => STEP_ERROR[s](s));
  private readonly sandboxes = new Map<string, FakeSandbox>();
  /** Suspended sandboxes' capture directories, by sandbox: the checkpoint each is owed. */
  private readonly owed = new Map<string, string>();
  private readonly listeners = new Set<(exit: SandboxExit) => void>();
  private seq = 0;

  constructor(
    readonly disk = new FakeDisk(),
    private readonly now: () => number = Date.now,
  ) {}

  async probe(): Promise<DriverAvailability> {
    return { available: true, version: 'fake-1' };
  }

  async prepare(): Promise<void> {}

  async start(req: StartRequest): Promise<SandboxHandle> {
    checkResources(req.resources);
    await this.faults.check('start');
    return this.add(req, {}, undefined);
  }

  async checkpoint(handle: SandboxHandle, opts: CheckpointOptions): Promise<Capture> {
    const sb = this.must(handle);
    if (sb.status !== 'running' && !(sb.status === 'paused' && opts.leaveRunning))
      throw new InvalidRequestError(`sandbox ${handle.id} is ${sb.status}`);
    await this.faults.check('checkpoint');
    if (this.disk.has(opts.dir)) throw new InvalidRequestError(`capture directory ${opts.dir} exists`);
    const meta = fakeCaptureMeta(handle.id, handle.resources, new Date(this.now()).toISOString());
    this.disk.write(opts.dir, { meta, state: { ...sb.state }, complete: true });
    this.owed.delete(handle.id);
    if (!opts.leaveRunning) this.sandboxes.delete(handle.id);
    return { dir: opts.dir, meta };
  }

  async restore(req: RestoreRequest): Promise<SandboxHandle> {
    checkResources(req.resources);
    const dir = typeof req.capture === 'string' ? req.capture : req.capture.dir;
    const capture = this.disk.read(dir);
    if (!capture?.complete) throw new CaptureInvalidError(`no capture at ${dir}`);
    await this.faults.check('restore');
    return this.add(
      { resources: req.resources, ...(req.net ? { net: req.net } : {}), envdPort: capture.meta.envdPort },
      capture.state,
      dir,
    );
  }

  async pause(handle: SandboxHandle): Promise<void> {
    const sb = this.mustRun(handle);
    await this.faults.check('pause');
    sb.status = 'paused';
  }

  async suspend(handle: SandboxHandle, captureDir: string): Promise<void> {
    this.owed.set(handle.id, captureDir);
    try {
      await this.pause(handle);
    } catch (err) {
      this.owed.delete(handle.id);
      throw err;
    }
  }

  async resume(handle: SandboxHandle): Promise<void> {
    const sb = this.must(handle);
    await this.faults.check('resume');
    sb.status = 'running';
    this.owed.delete(handle.id);
  }

  async freeze(handle: SandboxHandle): Promise<void> {
    const sb = this.mustRun(handle);
    await this.faults.check('freeze');
    sb.status = 'frozen';
  }

  async thaw(handle: SandboxHandle): Promise<void> {
    const sb = this.must(handle);
    await this.faults.check('thaw');
    if (sb.status === 'frozen') sb.status = 'running';
  }

  async kill(handle: SandboxHandle): Promise<void> {
    await this.faults.check('kill');
    this.sandboxes.delete(handle.id);
    this.owed.delete(handle.id);
  }

  /** Objects hold no host resources: a stopped fake sandbox is released at once. */
  async released(): Promise<void> {}

  releasing(): readonly ReleasingSandbox[] {
    return [];
  }

  async stats(handle: SandboxHandle): Promise<SandboxStats> {
    const sb = this.must(handle);
    await this.faults.check('stats');
    const limit = handle.resources.memoryMB * 2 ** 20;
    return {
      cpuNs: sb.cpuNs,
      memoryBytes: limit / 4,
      workingSetBytes: limit / 4,
      pssBytes: null,
      memoryLimitBytes: limit,
      diskBytes: null,
      pids: 1,
    };
  }

  async cpuUse(handle: SandboxHandle, opts: { threads?: boolean } = {}): Promise<CpuUse | null> {
    await this.faults.check('cpuUse');
    const sb = this.sandboxes.get(handle.id);
    if (!sb) return null;
    const threads = opts.threads ?? true;
    if (threads) this.threadReads++;
    return { cpuNs: sb.cpuNs, runnableNs: new Map(threads ? [[1, sb.runnableNs]] : []) };
  }

  /** How many cpuUse calls read the threads' figures (one file per host thread on a real host). */
  threadReads = 0;

  /** The sandbox's processes used `ns` more nanoseconds of CPU (a job running inside it). */
  runCpu(handle: SandboxHandle, ns: number): void {
    const sb = this.must(handle);
    sb.cpuNs += ns;
    sb.runnableNs += ns;
  }

  /**
   * A job in the sandbox wanted `ns` more nanoseconds of CPU but got only `gotNs` of them: the
   * host's CPUs were busy with others.
   */
  starveCpu(handle: SandboxHandle, ns: number, gotNs: number): void {
    const sb = this.must(handle);
    sb.cpuNs += gotNs;
    sb.runnableNs += ns;
  }

  async status(handle: SandboxHandle): Promise<SandboxStatus> {
    return this.sandboxes.get(handle.id)?.status ?? 'stopped';
  }

  onExit(listener: (exit: SandboxExit) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.sandboxes.clear();
  }

  // ---- what tests look at and do ----

  /** Handles of the sandboxes that exist (running or paused in place). */
  running(): SandboxHandle[] {
    return [...this.sandboxes.values()].map((s) => s.handle);
  }

  /** A sandbox's state (what a restore of its capture would have). */
  state(handleId: string): Record<string, string> {
    return { ...this.mustId(handleId).state };
  }

  /** Writes into a sandbox's state, as a process in it would. */
  write(handleId: string, key: string, value: string): void {
    this.mustId(handleId).state[key] = value;
  }

  /** The sandbox dies on its own; listeners hear it as the runtime would say it. */
  crash(handleId: string, reason = 'the sandbox process exited'): void {
    this.sandboxes.delete(handleId);
    for (const l of this.listeners) l({ id: handleId, reason });
  }

  /**
   * The node's process ends: every runtime sandbox is gone (a restarted node reclaims them), a
   * suspended one after the checkpoint it was owed, as the next driver's prepare() takes it.
   */
  reclaimAll(): void {
    for (const [id, dir] of this.owed) {
      const sb = this.sandboxes.get(id);
      if (sb && !this.disk.has(dir)) {
        const meta = fakeCaptureMeta(id, sb.handle.resources, new Date(this.now()).toISOString());
        this.disk.write(dir, { meta, state: { ...sb.state }, complete: true });
      }
    }
    this.owed.clear();
    this.sandboxes.clear();
  }

  private add(
    req: Pick<StartRequest, 'resources' | 'net' | 'envdPort'>,
    state: Readonly<Record<string, string>>,
    restoredFrom: string | undefined,
  ): SandboxHandle {
    const id = `fake${String(++this.seq).padStart(8, '0')}`;
    const handle: SandboxHandle = {
      id,
      driver: this.name,
      resources: req.resources,
      ...(req.net ? { net: req.net } : {}),
      envdPort: req.envdPort,
      readyAt: this.now(),
      ...(restoredFrom ? { restoredFrom } : {}),
    };
    this.sandboxes.set(id, { handle, status: 'running', state: { ...state }, cpuNs: 0, runnableNs: 0 });
    return handle;
  }

  private must(handle: SandboxHandle): FakeSandbox {
    return this.mustId(handle.id);
  }

  private mustId(id: string): FakeSandbox {
    const sb = this.sandboxes.get(id);
    if (!sb) throw new SandboxNotFoundError(id);
    return sb;
  }

  private mustRun(handle: SandboxHandle): FakeSandbox {
    const sb = this.must(handle);
    if (sb.status !== 'running') throw new InvalidRequestError(`sandbox ${handle.id} is ${sb.status}`);
    return sb;
  }
}

function checkResources(r: StartRequest['resources']): void {
  if (!(r.cpuCount > 0 && r.memoryMB > 0 && r.diskSizeMB > 0))
    throw new InvalidRequestError(`bad resources ${JSON.stringify(r)}`);
}
