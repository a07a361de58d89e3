import { sandboxUsage, type UsageSample } from './sandbox-usage.js';
import type { EgressRules } from '../network/index.js';
import { forEachLimit } from '@agentenv/common';
import type { ActivityTracker } from './activity.js';
import { Admission, maxSandboxes, maxStartsInFlight, notWhileStopping } from './admission.js';
import { Capturer } from './capture.js';
import { Forker, type ForkResult } from './fork.js';
import { SandboxCore, type DrainCause, type OrchestratorDeps } from './core.js';
import { Creator, type CreateSandboxInput } from './create.js';
import { Exits } from './exits.js';
import { forkChildSettings, type SandboxSettings } from './fork-settings.js';
import { Expiry } from './expiry.js';
import { IdleFreezer } from './idle.js';
import { Killer } from './kill.js';
import { MemoryPressure, type MemoryFigures } from './memory-pressure.js';
import type { LifecycleReason } from './observer.js';
import { Pauser } from './pause.js';
import { PauseUploads } from './pause-upload.js';
import type { PauseKind, SandboxRecord } from './record.js';
import type { SandboxLogEntry } from './sandbox-logs.js';
import { recover } from './recovery.js';
import { Resumer, type ConnectOptions } from './resume.js';
import type { SnapshotInfo } from './seams.js';
import { Settings } from './settings.js';
import { SANDBOX_STATES, type SandboxState } from './states.js';

/** Starts queued per start slot beyond which creates are refused at once. */
const QUEUED_STARTS_PER_SLOT = 4;
/** Parallel pauses while the node stops. */
const SHUTDOWN_PAUSES = 4;
/** How often the TTL loop looks (AGENTENV-API.md §2: about once a second). */
const TTL_INTERVAL_MS = 1000;

/**
 * The sandbox state machine on one node. Every operation on a sandbox runs under that
 * sandbox's lock and moves its stored state with compare-and-set (SandboxCore.transition), so
 * concurrent calls serialise and a crash leaves a state the next start can interpret (recovery).
 * The work itself lives in one part per concern: creating (with admission), pausing, resuming
 * (with takeover from other nodes), capturing (snapshot, fork), killing, settings, and the
 * background work (TTL, runtime exits).
 */
export class Orchestrator {
  private readonly core: SandboxCore;
  private readonly admission: Admission;
  private readonly creator: Creator;
  private readonly pauser: Pauser;
  private readonly uploads: PauseUploads;
  private readonly resumer: Resumer;
  private readonly capturer: Capturer;
  private readonly forker: Forker;
  private readonly killer: Killer;
  private readonly settings: Settings;
  private readonly expiry: Expiry;
  private readonly memory: MemoryPressure | undefined;
  private readonly idle: IdleFreezer;
  private readonly offExit: () => void;
  private stopping = false;

  constructor(deps: OrchestratorDeps) {
    const core = (this.core = new SandboxCore(deps));
    const {
      maxSandboxes: max,
      maxConcurrentStarts,
      memoryOvercommit,
      memoryLimitMb,
    } = deps.config.orchestrator;
    this.memory =
      deps.memory &&
      new MemoryPressure(
        core,
        deps.memory.host,
        deps.memory.totalBytes,
        { overcommit: memoryOvercommit, ...(memoryLimitMb ? { limitBytes: memoryLimitMb * 2 ** 20 } : {}) },
        {
          pause: (id) => this.pause(id, 'memory_pressure'),
          resume: (id, secs) => this.connect(id, secs, { reason: 'memory_pressure' }),
        },
        (id) => this.idle.isFrozen(id),
      );
    this.admission = new Admission(
      [
        notWhileStopping(() => this.stopping),
        maxSandboxes(max),
        maxStartsInFlight(maxConcurrentStarts * QUEUED_STARTS_PER_SLOT),
        ...(this.memory ? [this.memory.measure()] : []),
        ...(deps.admission ?? []),
      ],
      () => core.live.size + core.suspended.size,
      () => deps.driver.releasing(),
    );
    this.creator = new Creator(core, this.admission);
    this.uploads = new PauseUploads(core);
    this.pauser = new Pauser(core, this.uploads);
    this.resumer = new Resumer(core, this.admission);
    this.capturer = new Capturer(core);
    this.forker = new Forker(core, this.creator);
    this.killer = new Killer(core);
    this.settings = new Settings(core);
    this.expiry = new Expiry(core, {
      pause: (id, r, kind) => this.pause(id, r, kind),
      kill: (id, r) => this.kill(id, r),
    });
    const { idleFreezeSecs, idleFreezeCpuPct } = deps.config.orchestrator;
    this.idle = new IdleFreezer(core, idleFreezeSecs * 1000, idleFreezeCpuPct);
    this.offExit = new Exits(core).listen();
  }

  /**
   * Registers work that must happen before a sandbox is captured or killed: the proxy closes
   * its connections into the sandbox there.
   */
  beforeCapture(drain: (sandboxId: string, why: DrainCause) => Promise<void>): void {
    this.core.beforeCapture(drain);
  }

  /** What clients are doing in each sandbox (the proxy reports its requests here). */
  get activity(): ActivityTracker {
    return this.core.activity;
  }

  /**
   * Before traffic reaches a sandbox (the proxy calls it): counts as use, and thaws the sandbox
   * when it was frozen for idleness.
   */
  wake(id: string): Promise<void> {
    return this.idle.wake(id);
  }

  // ---- queries ----

  get(id: string): SandboxRecord {
    return this.core.get(id);
  }

  /** The settings a child of this sandbox gets, also one started on another node. */
  forkSettings(id: string): SandboxSettings {
    return forkChildSettings(this.get(id), undefined, this.core.clock.now());
  }

  find(id: string): SandboxRecord | undefined {
    return this.core.d.store.get(id);
  }

  list(): SandboxRecord[] {
    return this.core.d.store.all();
  }

  /** The host-side address the proxy dials for a running sandbox. */
  target(id: string): { address: string; record: SandboxRecord } | undefined {
    const live = this.core.live.get(id);
    const rec = this.core.d.store.get(id);
    if (!live || !rec || rec.state !== 'running') return undefined;
    return { address: live.slot.hostAddress, record: rec };
  }

  sandboxLogs(id: string): SandboxLogEntry[] {
    this.get(id);
    return this.core.logs.get(id);
  }

  /** A running sandbox's usage now (envd's view, corrected with its size and the driver's). */
  async usage(id: string): Promise<UsageSample | undefined> {
    const rec = this.get(id);
    const live = this.core.live.get(id);
    if (rec.state !== 'running' || !live) return undefined;
    // A frozen sandbox's envd cannot answer, and sampling it must not wake it: it uses no CPU and
    // holds the memory and disk it had.
    if (this.idle.isFrozen(id)) {
      const ts = Math.floor(this.core.clock.now() / 1000);
      return live.lastUsage && { ...live.lastUsage, cpuUsedPct: 0, ts };
    }
    const { envd, driver } = this.core.d;
    const [raw, stats] = await Promise.all([
      envd(live.slot.hostAddress, live.handle.envdPort).metrics(rec.envdAccessToken),
      driver.stats(live.handle).then(
        (s) => (this.memory?.record(id, s.workingSetBytes), s),
        () => undefined,
      ),
    ]);
    const ts = Math.floor(this.core.clock.now() / 1000);
    live.lastUsage = { ...sandboxUsage(raw, rec, stats?.diskBytes ?? null), ts };
    return live.lastUsage;
  }

  /** Nominal, measured and free memory; undefined when the node was not given the host's memory. */
  memoryFigures(): MemoryFigures | undefined {
    return this.memory?.figures();
  }

  /** Waits for any operation under way on the sandbox. */
  settled(id: string): Promise<void> {
    return this.core.mutex.idle(id);
  }

  counts(): Record<SandboxState, number> {
    const stored = this.core.d.store.countByState();
    return Object.fromEntries(SANDBOX_STATES.map((s) => [s, stored.get(s) ?? 0])) as Record<
      SandboxState,
      number
    >;
  }

  get isShuttingDown(): boolean {
    return this.stopping;
  }

  // ---- lifecycle ----

  create(input: CreateSandboxInput): Promise<SandboxRecord> {
    return this.creator.create(input);
  }

  /**
   * `filesystem` keeps the writable layer only: the resume cold-boots. `untilStored` answers once
   * the pause is in the snapshot repository (or storing it failed), not once it is on this disk.
   */
  async pause(
    id: string,
    reason: LifecycleReason = 'request',
    kind: PauseKind = 'memory',
    untilStored = false,
  ): Promise<void> {
    await this.idle.wake(id, reason === 'request');
    return this.pauser.pause(id, reason, kind, untilStored);
  }

  /** Resumes a paused sandbox (or only extends a running one's life); true when it resumed. */
  async connect(id: string, timeoutSecs: number, how: ConnectOptions = {}): Promise<boolean> {
    await this.idle.wake(id);
    // The pause's upload would only be dropped once it resumes, and slows the restore meanwhile.
    this.uploads.cancel(id);
    return this.resumer.connect(id, timeoutSecs, how);
  }

  /**
   * Answers once this node can start sandboxes from the snapshot; `untilStored`: once the shared
   * repository holds it, so that every node can.
   */
  async snapshot(id: string, name?: string, untilStored = false): Promise<SnapshotInfo> {
    await this.ready(id);
    return this.capturer.snapshot(id, name, untilStored);
  }

  async fork(id: string, count: number, timeoutSecs: number | undefined): Promise<ForkResult[]> {
    await this.ready(id);
    return this.forker.fork(id, count, timeoutSecs);
  }

  kill(id: string, reason: LifecycleReason = 'request'): Promise<void> {
    this.uploads.cancel(id);
    return this.killer.kill(id, reason);
  }

  /**
   * POST /timeout: end = now + secs, which may shorten it. 0 is E2B's "time out now": the timeout
   * action (kill or pause) starts at once instead of at the next TTL sweep.
   */
  async setTimeout(id: string, secs: number): Promise<void> {
    await this.ready(id);
    await this.settings.endTime(id, secs, 'set');
    if (secs === 0) this.expiry.sweep();
  }

  /** POST /refreshes: extend only. */
  async refresh(id: string, secs: number): Promise<void> {
    await this.ready(id);
    return this.settings.endTime(id, secs, 'extend');
  }

  async setNetwork(id: string, egress: EgressRules): Promise<void> {
    await this.idle.wake(id);
    return this.settings.setNetwork(id, egress);
  }

  // ---- the node's own work ----

  /** Pauses (or kills, with autoPause false) running sandboxes whose end time has passed. */
  startTtlLoop(intervalMs = TTL_INTERVAL_MS): void {
    this.expiry.start(intervalMs);
  }

  /** Freezes running sandboxes idle for `[orchestrator] idle_freeze_secs` (idle.ts); 0 turns it off. */
  startIdleLoop(): void {
    this.idle.start();
  }

  /** Resolves once the background work started so far (TTL actions, reclaims) has settled. */
  backgroundIdle(sandboxId?: string): Promise<void> {
    return this.core.background.idle(sandboxId);
  }

  /** Pauses idle sandboxes under host memory pressure (see memory-pressure.ts). */
  startMemoryWatch(): void {
    this.memory?.start();
  }

  /**
   * Resumes a sandbox paused for memory, as any request to it does (the proxy's, and the calls
   * below that need it running); false when it was not paused so.
   */
  async resumeForMemory(id: string): Promise<boolean> {
    const rec = this.find(id);
    return rec !== undefined && this.memory !== undefined && this.memory.wake(rec);
  }

  /** Before a call that needs the sandbox running: back from a memory pause, then thawed. */
  private async ready(id: string): Promise<void> {
    await this.resumeForMemory(id);
    await this.idle.wake(id);
  }

  /** After a restart: see recovery.ts; pause uploads and snapshot stores cut short start again. */
  recover(): { paused: number; lost: string[] } {
    const result = recover(this.core);
    this.uploads.restartPending();
    this.capturer.storeLeftovers();
    return result;
  }

  /** SIGTERM: stop taking work and pause every running sandbox, so it resumes after a restart. */
  async shutdown(): Promise<void> {
    this.stopping = true;
    // Stops the TTL loop at once; what background work runs is waited for at the end.
    const background = this.core.background.close();
    const running = this.list().filter((r) => r.state === 'running');
    await this.core.d.pool?.close();
    await forEachLimit(running, SHUTDOWN_PAUSES, (r) =>
      this.pause(r.sandboxId, 'shutdown').catch((err) =>
        this.core.d.logger.error({ err, sandboxId: r.sandboxId }, 'pause at shutdown failed'),
      ),
    );
    await background;
    await this.pauser.captureLeftovers();
    // The pauses above answered before their uploads ended: the repository gets them all.
    await this.uploads.idle();
    this.offExit();
  }
}
