import type { Logger } from 'pino';
import { conflict, DomainError, isFault, notFound, withContext } from '@agentenv/common';
import type { UsageSample } from './sandbox-usage.js';
import type { NodeConfig } from '../config/index.js';
import type { EnvdConnector } from '../envd/index.js';
import type { NetSlot } from '../network/index.js';
import type { RuntimeDriver, SandboxHandle } from '../runtime/index.js';
import { isoTime, KeyedMutex, systemClock, type Clock } from '../util/index.js';
import { ActivityTracker } from './activity.js';
import type { AdmissionMeasure } from './admission.js';
import { BackgroundWork } from './background.js';
import type { LifecycleEventType, LifecycleObserver, LifecycleReason } from './observer.js';
import type { SandboxRecord } from './record.js';
import { SandboxLogs } from './sandbox-logs.js';
import type {
  CaptureDirs,
  HostMemory,
  PauseRepository,
  SandboxRecordStore,
  SlotProvider,
  SnapshotCatalog,
  SourceResolver,
  VolumeLocator,
} from './seams.js';
import { transitionFor, type Operation } from './states.js';
import type { SandboxWarmPool } from './warm-pool.js';

export interface OrchestratorDeps {
  config: NodeConfig;
  store: SandboxRecordStore;
  driver: RuntimeDriver;
  sources: SourceResolver;
  slots: SlotProvider;
  envd: EnvdConnector;
  logger: Logger;
  nodeSecret: string;
  /** Where captures are written on this node's disk (durable, under $AENV_HOME). */
  captures: CaptureDirs;
  observer: LifecycleObserver;
  snapshots: SnapshotCatalog;
  pauses: PauseRepository;
  /** A sandbox's volumes, for a start with its files only (a filesystem-only resume, a reboot). */
  volumes: VolumeLocator;
  /** Restored sandboxes waiting for a create; absent or size 0 disables it. */
  pool?: SandboxWarmPool;
  /** Time for TTLs, timestamps and timers; the wall clock unless a test gives its own. */
  clock?: Clock;
  /** Reasons to refuse a start besides the configured limits (measured memory, …). */
  admission?: readonly AdmissionMeasure[];
  /** The host's memory: with it, admission counts measured memory and pressure pauses idle sandboxes. */
  memory?: { host: HostMemory; totalBytes: number };
}

/** What a sandbox's connections are drained for: the operation about to close them. */
export type DrainCause = 'pause' | 'kill' | 'snapshot' | 'fork';
/** How a call treats the end time of a running sandbox: `set` may shorten it, `extend` not. */
export type EndTimeMode = 'extend' | 'set';

/** A sandbox whose runtime sandbox lives on this node. */
export interface Live {
  handle: SandboxHandle;
  slot: NetSlot;
  /** Its newest usage sample, reported again (without CPU) while it is frozen. */
  lastUsage?: UsageSample;
}

/**
 * A sandbox whose pause answered once its runtime sandbox was suspended: the checkpoint runs
 * after the answer, and the runtime sandbox is stopped once it is complete. Until then a resume
 * runs it on where it stopped, and a kill stops it.
 */
export interface Suspended {
  readonly live: Live;
  /** Settles when the checkpoint ended: true when it is complete. */
  readonly captured: Promise<boolean>;
}

/**
 * What every part of the orchestrator shares: the dependencies, the sandboxes live on this node,
 * the per-sandbox lock, and `transition()`, the one way a sandbox's stored state moves.
 */
export class SandboxCore {
  readonly live = new Map<string, Live>();
  readonly suspended = new Map<string, Suspended>();
  readonly mutex = new KeyedMutex();
  readonly clock: Clock;
  readonly logs: SandboxLogs;
  readonly background: BackgroundWork;
  readonly activity: ActivityTracker;
  private readonly drains: ((sandboxId: string, why: DrainCause) => Promise<void>)[] = [];

  constructor(readonly d: OrchestratorDeps) {
    this.clock = d.clock ?? systemClock;
    this.logs = new SandboxLogs(() => this.clock.now());
    this.background = new BackgroundWork(this.clock, d.logger);
    this.activity = new ActivityTracker(this.clock);
  }

  get(id: string): SandboxRecord {
    const rec = this.d.store.get(id);
    if (!rec) throw notFound(`sandbox ${id} not found`);
    return rec;
  }

  mustLive(id: string): Live {
    const live = this.live.get(id);
    if (!live) throw new DomainError('internal', `sandbox ${id} is not live on this node`);
    return live;
  }

  /** An ISO end time `secs` from now. */
  endIn(secs: number): string {
    return isoTime(this.clock.now() + secs * 1000);
  }

  /** Moves the end time to `secs` from now; `extend` never shortens it. */
  setEndTime(rec: SandboxRecord, secs: number, mode: EndTimeMode): void {
    const end = this.endIn(secs);
    if (mode === 'set' || end > rec.endAt) this.d.store.update({ ...rec, endAt: end });
  }

  /**
   * Runs `op` on a sandbox: under its lock, from an allowed state, through the operation's
   * transient state. `work` returns the record to store at the end, or 'deleted'. When `work`
   * fails, the stored state goes back to what it was (work releases what it took; the driver
   * leaves a sandbox as it was when a checkpoint or restore fails). `alreadyDone` answers
   * without a transition (a connect to a running sandbox).
   */
  transition(
    id: string,
    op: Operation,
    work: (rec: SandboxRecord) => Promise<SandboxRecord | 'deleted'>,
    alreadyDone?: (rec: SandboxRecord) => boolean,
  ): Promise<SandboxRecord | undefined> {
    return this.mutex.run(id, async () => {
      const rec = this.get(id);
      if (alreadyDone?.(rec)) return undefined;
      const t = transitionFor(op);
      if (!t.from.includes(rec.state)) throw conflict(`sandbox ${id} is ${rec.state}; cannot ${op}`);
      const during: SandboxRecord = { ...rec, state: t.during };
      if (!this.d.store.compareAndSet(during, rec.state))
        throw conflict(`sandbox ${id} changed state; retry`);
      const t0 = this.clock.now();
      try {
        const after = await work(during);
        if (after === 'deleted') this.d.store.delete(id);
        else if (!this.d.store.compareAndSet(after, t.during))
          throw new DomainError('internal', `sandbox ${id} changed during ${op}`);
        this.d.observer.stage(op, this.clock.now() - t0);
        return after === 'deleted' ? undefined : after;
      } catch (err) {
        this.failed(op, id, err);
        const current = this.d.store.get(id);
        if (current?.state === t.during)
          this.d.store.compareAndSet({ ...current, state: rec.state }, t.during);
        throw withContext(err, `${op} failed`);
      }
    });
  }

  /** Counts and logs a failed operation; a refusal (capacity, conflict, …) is logged quietly. */
  failed(op: string, sandboxId: string | undefined, err: unknown): void {
    this.d.observer.failed(op);
    const fault = !(err instanceof DomainError) || isFault(err.kind);
    this.d.logger[fault ? 'error' : 'info']({ err, sandboxId, op }, 'sandbox operation failed');
  }

  emit(
    type: LifecycleEventType,
    sandboxId: string,
    reason: LifecycleReason,
    details?: Record<string, string>,
  ): void {
    this.d.observer.event({ type, sandboxId, reason, at: this.clock.now(), ...(details ? { details } : {}) });
  }

  /** Registers work that must happen before a sandbox is captured or killed (the proxy's drain). */
  beforeCapture(drain: (sandboxId: string, why: DrainCause) => Promise<void>): void {
    this.drains.push(drain);
  }

  async drainConnections(id: string, why: DrainCause): Promise<void> {
    for (const d of this.drains) await d(id, why);
  }

  /** Gives a network slot back; a failure is logged (the sandbox that used it is gone). */
  async releaseSlot(slot: NetSlot, sandboxId?: string): Promise<void> {
    await this.d.slots
      .release(slot)
      .catch((err) => this.d.logger.warn({ err, sandboxId }, 'slot release failed'));
  }

  /**
   * Gives a stopped sandbox's network slot back in the background, once its processes have
   * exited: the slot may go to another sandbox next.
   */
  releaseWhenGone(id: string, live: Live): void {
    void this.background.run('slot-release', id, async () => {
      await this.d.driver.released(live.handle.id);
      await this.releaseSlot(live.slot, id);
    });
  }

  /**
   * Stops a suspended sandbox's runtime sandbox (its pause's checkpoint ended) and forgets it;
   * its slot goes back once the processes have exited. A failed kill leaves it suspended.
   */
  async stopSuspended(id: string, held: Suspended): Promise<void> {
    await this.d.driver.kill(held.live.handle);
    this.suspended.delete(id);
    this.releaseWhenGone(id, held.live);
  }

  /** The repository's pause of a sandbox that is gone for good, or that a newer pause replaced. */
  async dropPause(sandboxId: string, pauseId: string): Promise<void> {
    await this.d.pauses
      .drop(pauseId)
      .catch((err) => this.d.logger.warn({ err, sandboxId, pauseId }, 'dropping the pause failed'));
  }

  /** Removes a sandbox's local captures; a failure is logged (they are obsolete either way). */
  async discardCaptures(sandboxId: string): Promise<void> {
    await this.d.captures
      .removeAll(sandboxId)
      .catch((err) => this.d.logger.warn({ err, sandboxId }, 'removing captures failed'));
  }

  /** Drops what is left of a sandbox that is gone for good: local captures, stored pause, logs. */
  async reclaimRemains(rec: SandboxRecord): Promise<void> {
    await this.discardCaptures(rec.sandboxId);
    if (rec.pauseId) await this.dropPause(rec.sandboxId, rec.pauseId);
    this.forget(rec.sandboxId);
  }

  /** Forgets what this node kept in memory about a sandbox that is gone. */
  forget(id: string): void {
    this.logs.drop(id);
    this.activity.forget(id);
  }
}
