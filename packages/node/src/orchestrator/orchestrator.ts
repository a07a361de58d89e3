import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { DomainError, conflict, invalid, notFound, STATUS } from '@agentenv/common';
import type { NodeConfig } from '../config/index.js';
import { initDefaults, type EnvdConnector } from '../envd/index.js';
import { sandboxUsage, type UsageSample } from '../metrics/index.js';
import type { EgressRules, NetSlot } from '../network/index.js';
import { readCapture, type Capture, type RuntimeDriver, type SandboxHandle } from '../runtime/index.js';
import { envdAccessToken, trafficAccessToken } from '../security/index.js';
import { SnapshotError } from '../snapshot/index.js';
import { forEachLimit, KeyedMutex, newSandboxId } from '../util/index.js';
import type { LifecycleEventType, LifecycleObserver } from './observer.js';
import type { SandboxStore } from './persistence/index.js';
import type { SandboxRecord } from './record.js';
import { SandboxLogs, type SandboxLogEntry } from './sandbox-logs.js';
import type {
  PauseRepository,
  ResolvedTemplate,
  SandboxSource,
  SlotProvider,
  SnapshotCatalog,
  SnapshotInfo,
  SourceResolver,
} from './seams.js';
import { isTransient, transitionFor, type Operation, type SandboxState } from './states.js';
import type { SandboxWarmPool } from './warm-pool.js';

export interface CreateSandboxInput {
  source: SandboxSource;
  timeoutSecs: number;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  autoPause: boolean;
  autoResume: boolean;
  secure: boolean;
  egress: EgressRules;
  allowPublicTraffic: boolean;
  /** Volumes to bind-mount read-write: the name and path shown, the host directory behind them. */
  volumeMounts?: readonly { name: string; path: string; hostPath: string }[];
}

export interface OrchestratorDeps {
  config: NodeConfig;
  store: SandboxStore;
  driver: RuntimeDriver;
  sources: SourceResolver;
  slots: SlotProvider;
  envd: EnvdConnector;
  logger: Logger;
  nodeSecret: string;
  /** Where paused sandboxes' captures live (durable, under $AENV_HOME). */
  capturesDir: string;
  observer: LifecycleObserver;
  snapshots: SnapshotCatalog;
  pauses: PauseRepository;
  /** Restored sandboxes waiting for a create; absent or size 0 disables it. */
  pool?: SandboxWarmPool;
}

interface Live {
  handle: SandboxHandle;
  slot: NetSlot;
}

const addSeconds = (d: Date, s: number) => new Date(d.getTime() + s * 1000).toISOString();

/**
 * The sandbox state machine on one node. Every operation on a sandbox runs under that
 * sandbox's lock and moves its stored state with compare-and-set, so concurrent calls serialise
 * and a crash leaves a state the next start can interpret (see recover()).
 */
export class Orchestrator {
  private readonly live = new Map<string, Live>();
  private readonly mutex = new KeyedMutex();
  private readonly logs = new SandboxLogs();
  private starting = 0;
  private shuttingDown = false;
  private ttlTimer: NodeJS.Timeout | undefined;
  private readonly expiring = new Set<string>();
  private readonly offExit: () => void;
  private readonly drains: ((sandboxId: string) => Promise<void>)[] = [];

  constructor(private readonly d: OrchestratorDeps) {
    this.offExit = d.driver.onExit((exit) => void this.onRuntimeExit(exit.id, exit.reason));
  }

  /**
   * Registers work that must happen before a sandbox is captured or killed: the proxy closes
   * its connections into the sandbox there.
   */
  beforeCapture(drain: (sandboxId: string) => Promise<void>): void {
    this.drains.push(drain);
  }

  private async drainConnections(id: string): Promise<void> {
    for (const d of this.drains) await d(id);
  }

  // ---- queries ----

  get(id: string): SandboxRecord {
    const rec = this.find(id);
    if (!rec) throw notFound(`sandbox ${id} not found`);
    return rec;
  }

  find(id: string): SandboxRecord | undefined {
    return this.d.store.get(id);
  }

  list(): SandboxRecord[] {
    return this.d.store.all();
  }

  /** The host-side address and port the proxy dials for a running sandbox's port. */
  target(id: string): { address: string; record: SandboxRecord } | undefined {
    const live = this.live.get(id);
    const rec = this.d.store.get(id);
    if (!live || !rec || rec.state !== 'running') return undefined;
    return { address: live.slot.hostAddress, record: rec };
  }

  sandboxLogs(id: string): SandboxLogEntry[] {
    this.get(id);
    return this.logs.get(id);
  }

  /** A running sandbox's usage now (envd's view, corrected with its size and the driver's). */
  async usage(id: string): Promise<UsageSample | undefined> {
    const rec = this.get(id);
    const live = this.live.get(id);
    if (rec.state !== 'running' || !live) return undefined;
    const [raw, stats] = await Promise.all([
      this.d.envd(live.slot.hostAddress, live.handle.envdPort).metrics(rec.envdAccessToken),
      this.d.driver.stats(live.handle).catch(() => undefined),
    ]);
    return { ...sandboxUsage(raw, rec, stats?.diskBytes ?? null), ts: Math.floor(Date.now() / 1000) };
  }

  /** Waits for any operation under way on the sandbox. */
  settled(id: string): Promise<void> {
    return this.mutex.idle(id);
  }

  counts(): Record<SandboxState, number> {
    const c = Object.fromEntries(
      ['creating', 'running', 'snapshotting', 'forking', 'pausing', 'paused', 'resuming', 'killing'].map(
        (s) => [s, 0],
      ),
    ) as Record<SandboxState, number>;
    for (const r of this.d.store.all()) c[r.state]++;
    return c;
  }

  // ---- lifecycle ----

  async create(input: CreateSandboxInput): Promise<SandboxRecord> {
    this.admit();
    this.starting++;
    try {
      return await this.createAdmitted(input);
    } finally {
      this.starting--;
    }
  }

  private admit(): void {
    const { maxSandboxes, maxConcurrentStarts } = this.d.config.orchestrator;
    if (this.shuttingDown) throw new DomainError('unavailable', 'the node is shutting down', 5);
    if (this.live.size + this.starting >= maxSandboxes) {
      throw new DomainError('capacity', `this node runs its maximum of ${maxSandboxes} sandboxes`, 5);
    }
    // Beyond a few queued starts per slot, clients learn it now instead of timing out.
    if (this.starting >= maxConcurrentStarts * 4) {
      throw new DomainError('unavailable', 'too many sandboxes starting at once; retry shortly', 1);
    }
  }

  private async createAdmitted(input: CreateSandboxInput): Promise<SandboxRecord> {
    const template = await this.d.sources.resolve(input.source);
    try {
      const pooled =
        !template.snapshotId && template.capture && !input.volumeMounts?.length ? this.d.pool : undefined;
      return await this.launch(template, input, pooled);
    } finally {
      template.release?.();
    }
  }

  /** A new sandbox record from a template or snapshot, started and initialised. */
  private async launch(
    template: ResolvedTemplate,
    input: CreateSandboxInput,
    pool?: SandboxWarmPool,
  ): Promise<SandboxRecord> {
    const t0 = Date.now();
    const id = newSandboxId();
    const now = new Date();
    // A fork's children mount the parent's volumes already: they are in its capture.
    const shownMounts = input.volumeMounts?.length
      ? input.volumeMounts.map(({ name, path }) => ({ name, path }))
      : input.source.kind === 'fork'
        ? input.source.parent.volumeMounts
        : undefined;
    const rec: SandboxRecord = {
      sandboxId: id,
      templateId: template.templateId,
      ...(template.alias ? { alias: template.alias } : {}),
      state: 'creating',
      startedAt: now.toISOString(),
      endAt: addSeconds(now, input.timeoutSecs),
      cpuCount: template.defaults.cpuCount,
      memoryMB: template.defaults.memoryMB,
      diskSizeMB: template.defaults.diskSizeMB,
      metadata: input.metadata,
      envVars: input.envVars,
      autoPause: input.autoPause,
      autoResume: input.autoResume,
      secure: input.secure,
      ...(input.secure ? { envdAccessToken: envdAccessToken(this.d.nodeSecret, id) } : {}),
      egress: input.egress,
      allowPublicTraffic: input.allowPublicTraffic,
      ...(!input.allowPublicTraffic ? { trafficAccessToken: trafficAccessToken(this.d.nodeSecret, id) } : {}),
      envdVersion: template.envdVersion,
      ...(shownMounts ? { volumeMounts: shownMounts } : {}),
    };
    const volumes = (input.volumeMounts ?? []).map((v) => ({
      hostPath: v.hostPath,
      sandboxPath: v.path,
      writable: true,
    }));
    const boot = template.boot ?? (volumes.length ? template.coldBoot : undefined);
    if (volumes.length && !boot)
      throw invalid(
        `volumes cannot be mounted into sandboxes of ${rec.templateId}: they restore a captured state`,
      );
    this.d.store.insert(rec);
    return this.mutex.run(id, async () => {
      let slot: NetSlot | undefined;
      let handle: SandboxHandle | undefined;
      try {
        const pooled = pool?.take(template);
        if (pooled) {
          ({ slot, handle } = pooled);
          await this.d.slots.setEgress(slot, rec.egress);
        } else {
          slot = await this.d.slots.acquire(rec.egress);
          handle = boot
            ? await this.d.driver.start({
                ...boot,
                mounts: [...(boot.mounts ?? []), ...volumes],
                resources: template.defaults,
                net: slot,
              })
            : await this.d.driver.restore({
                capture: template.capture!,
                resources: template.defaults,
                net: slot,
              });
        }
        await this.d.envd(slot.hostAddress, handle.envdPort).init(
          {
            envVars: {
              ...template.sandboxDefaults?.envVars,
              ...rec.envVars,
              E2B_SANDBOX: 'true',
              E2B_SANDBOX_ID: id,
              E2B_TEMPLATE_ID: rec.templateId,
            },
            // Empty clears a token a snapshot's source had, for a sandbox that is not secure.
            accessToken: rec.envdAccessToken ?? '',
            // Absent for snapshots and forks: envd's state is in the capture, so they keep the
            // default user their source had.
            ...initDefaults(template.sandboxDefaults),
            timestamp: new Date().toISOString(),
          },
          template.envdToken,
        );
        this.live.set(id, { handle, slot });
        const running: SandboxRecord = { ...rec, state: 'running', handle };
        if (!this.d.store.compareAndSet(running, 'creating'))
          throw new Error('sandbox record changed during create');
        this.logs.add(id, `sandbox created from ${template.snapshotId ?? rec.templateId}`);
        this.d.observer.event?.({ type: 'created', sandboxId: id, details: { template_id: rec.templateId } });
        this.d.observer.stage('create', Date.now() - t0);
        return running;
      } catch (err) {
        this.live.delete(id);
        if (handle) await this.d.driver.kill(handle).catch(() => undefined);
        if (slot) await this.d.slots.release(slot).catch(() => undefined);
        this.d.store.delete(id);
        this.d.observer.failed('create');
        this.d.logger.error({ err, sandboxId: id }, 'create failed');
        throw err instanceof DomainError
          ? err
          : new DomainError('internal', `sandbox failed to start: ${(err as Error).message}`);
      }
    });
  }

  /**
   * Runs `op` on a sandbox: under its lock, from an allowed state, through the operation's
   * transient state. `work` returns the record to store at the end, or 'deleted'.
   */
  private transition(
    id: string,
    op: Operation,
    work: (rec: SandboxRecord) => Promise<SandboxRecord | 'deleted'>,
    alreadyDone?: (rec: SandboxRecord) => boolean,
  ): Promise<SandboxRecord | undefined> {
    return this.mutex.run(id, async () => {
      const rec = this.get(id);
      if (alreadyDone?.(rec)) return undefined;
      const t = transitionFor(op);
      if (!t.from.includes(rec.state)) {
        throw conflict(`sandbox ${id} is ${rec.state}; cannot ${op}`);
      }
      const during: SandboxRecord = { ...rec, state: t.during };
      if (!this.d.store.compareAndSet(during, rec.state))
        throw conflict(`sandbox ${id} changed state; retry`);
      const t0 = Date.now();
      try {
        const after = await work(during);
        if (after === 'deleted') this.d.store.delete(id);
        else if (!this.d.store.compareAndSet(after, t.during))
          throw new Error(`sandbox ${id} changed during ${op}`);
        this.d.observer.stage(op, Date.now() - t0);
        if (OP_EVENT[op]) this.d.observer.event?.({ type: OP_EVENT[op], sandboxId: id });
        return after === 'deleted' ? undefined : after;
      } catch (err) {
        this.d.observer.failed(op);
        this.d.logger.error({ err, sandboxId: id, op }, 'sandbox operation failed');
        // Operations leave the sandbox as it was when they fail (the driver guarantees it for
        // checkpoint/restore); put the stored state back unless the sandbox is gone.
        const current = this.d.store.get(id);
        if (current?.state === t.during)
          this.d.store.compareAndSet({ ...current, state: rec.state }, t.during);
        throw operationError(op, err);
      }
    });
  }

  async pause(id: string): Promise<void> {
    await this.transition(id, 'pause', (rec) => this.pauseWork(rec));
  }

  private async pauseWork(rec: SandboxRecord): Promise<SandboxRecord> {
    const live = this.mustLive(rec.sandboxId);
    const dir = path.join(this.d.capturesDir, rec.sandboxId, `pause-${Date.now()}`);
    // Recorded before the capture, so recover() can find a capture completed just before a crash.
    this.d.store.update({ ...rec, captureDir: dir });
    await this.drainConnections(rec.sandboxId);
    await this.d.driver.checkpoint(live.handle, { dir, leaveRunning: false });
    this.live.delete(rec.sandboxId);
    await this.d.slots.release(live.slot).catch((err) => this.d.logger.warn({ err }, 'slot release failed'));
    this.logs.add(rec.sandboxId, 'sandbox paused');
    const { handle: _h, pauseId: _p, captureDir: _c, ...rest } = rec;
    return { ...rest, state: 'paused', ...(await this.storePause(rec, dir)) };
  }

  /**
   * Puts a pause capture into the shared repository (any node can resume it from there) and
   * then into this node's cache. When the repository fails the sandbox stays paused on this node
   * only, from its local capture.
   */
  private async storePause(
    rec: SandboxRecord,
    dir: string,
  ): Promise<{ captureDir?: string; pauseId?: string }> {
    let pauseId: string;
    try {
      pauseId = await this.d.pauses.save(dir, rec, rec.pauseId);
    } catch (err) {
      this.d.logger.warn({ err, sandboxId: rec.sandboxId }, 'pause kept on this node only');
      // The stored pause is older than this capture: nobody may resume from it any more.
      if (rec.pauseId) await this.dropPause(rec.sandboxId, rec.pauseId);
      return { captureDir: dir };
    }
    // From here the repository holds the state: a crash before the end still leaves it paused.
    const { captureDir: _c, ...rest } = rec;
    this.d.store.update({ ...rest, pauseId });
    if (rec.pauseId) await this.dropPause(rec.sandboxId, rec.pauseId);
    const kept = await this.d.pauses.keep(pauseId, dir).catch((err) => {
      this.d.logger.warn({ err, sandboxId: rec.sandboxId }, 'pause not cached');
      return false;
    });
    return kept ? { pauseId } : { pauseId, captureDir: dir };
  }

  /**
   * Captures a running sandbox as a snapshot; the sandbox is paused only while its memory and
   * filesystem are captured, then runs on with its id and end time unchanged.
   */
  async snapshot(id: string, name?: string): Promise<SnapshotInfo> {
    let source: SandboxRecord | undefined;
    let dir: string | undefined;
    await this.transition(id, 'snapshot', async (rec) => {
      source = rec;
      dir = await this.captureRunning(rec, 'snapshot');
      return { ...rec, state: 'running' };
    });
    // Stored after the sandbox is running again: its users (and the proxy, which waits while a
    // sandbox is in a transient state) wait for the checkpoint only, not for the upload.
    const rec = source!;
    try {
      const info = await this.d.snapshots.save(
        dir!,
        {
          names: name ? [name] : [],
          sourceSandboxId: id,
          templateId: rec.templateId,
          cpuCount: rec.cpuCount,
          memoryMB: rec.memoryMB,
          diskSizeMB: rec.diskSizeMB,
          envdVersion: rec.envdVersion,
        },
        rec.envdAccessToken,
      );
      this.logs.add(id, `snapshot ${info.snapshotID} taken`);
      this.d.observer.event?.({ type: 'snapshot', sandboxId: id, details: { snapshot_id: info.snapshotID } });
      return info;
    } catch (err) {
      this.d.observer.failed('snapshot');
      this.d.logger.error({ err, sandboxId: id }, 'storing a snapshot failed');
      throw operationError('snapshot', err);
    } finally {
      await rm(dir!, { recursive: true, force: true });
    }
  }

  /** Checkpoints a running sandbox into a fresh directory, leaving it running. */
  private async captureRunning(rec: SandboxRecord, kind: string): Promise<string> {
    const live = this.mustLive(rec.sandboxId);
    const dir = path.join(this.d.capturesDir, rec.sandboxId, `${kind}-${Date.now()}-${newSandboxId(6)}`);
    await this.drainConnections(rec.sandboxId);
    await this.d.driver.checkpoint(live.handle, { dir, leaveRunning: true });
    return dir;
  }

  /**
   * Forks a running sandbox into `count` independent children started in parallel from one
   * capture. The parent is paused only for the capture. One result per child: a failed child
   * affects neither the others nor the parent.
   */
  async fork(
    id: string,
    count: number,
    timeoutSecs: number | undefined,
  ): Promise<({ sandbox: SandboxRecord } | { error: { code: number; message: string } })[]> {
    const max = this.d.config.fork.maxChildren;
    if (!Number.isInteger(count) || count < 1 || count > max)
      throw invalid(`count must be between 1 and ${max}`);
    let parent: SandboxRecord | undefined;
    let dir: string | undefined;
    await this.transition(id, 'fork', async (rec) => {
      parent = rec;
      dir = await this.captureRunning(rec, 'fork');
      return { ...rec, state: 'running' };
    });
    try {
      const p = parent!;
      const source: SandboxSource = { kind: 'fork', capture: await readCapture(dir!), parent: p };
      const template = await this.d.sources.resolve(source);
      const input: CreateSandboxInput = {
        source,
        timeoutSecs: timeoutSecs ?? Math.max(1, Math.ceil((Date.parse(p.endAt) - Date.now()) / 1000)),
        metadata: p.metadata,
        envVars: p.envVars,
        autoPause: p.autoPause,
        autoResume: p.autoResume,
        secure: p.secure,
        egress: p.egress,
        allowPublicTraffic: p.allowPublicTraffic,
      };
      const results = await Promise.allSettled(
        Array.from({ length: count }, async () => {
          this.admit();
          this.starting++;
          try {
            return await this.launch(template, input);
          } finally {
            this.starting--;
          }
        }),
      );
      const forked = results.filter((r) => r.status === 'fulfilled').length;
      this.logs.add(id, `forked into ${forked} of ${count} children`);
      this.d.observer.event?.({ type: 'forked', sandboxId: id, details: { child_count: String(forked) } });
      return results.map((r) => {
        if (r.status === 'fulfilled') return { sandbox: r.value };
        const e = r.reason instanceof DomainError ? r.reason : new DomainError('internal', String(r.reason));
        return { error: { code: STATUS[e.kind], message: e.message } };
      });
    } finally {
      await rm(dir!, { recursive: true, force: true });
    }
  }

  /** Resumes a paused sandbox (or only extends a running one's life); true when it resumed. */
  async connect(id: string, timeoutSecs: number, mode: 'extend' | 'set' = 'extend'): Promise<boolean> {
    await this.takePaused(id);
    let resumed = false;
    await this.transition(
      id,
      'resume',
      async (rec) => {
        resumed = true;
        return this.resumeWork(rec, timeoutSecs);
      },
      (rec) => {
        if (rec.state !== 'running') return false;
        this.extend(rec, timeoutSecs, mode);
        return true;
      },
    );
    return resumed;
  }

  /**
   * Makes sure a paused sandbox is this node's to resume: one paused on another node sharing the
   * repository is taken over; one that another node took over meanwhile is forgotten here.
   */
  private async takePaused(id: string): Promise<void> {
    const rec = this.find(id);
    if (!rec) {
      const found = await this.d.pauses.findPaused(id);
      if (found && (await this.d.pauses.claim(found.pauseId))) {
        this.d.store.insert(found.record);
        this.logs.add(id, `sandbox taken over from the snapshot repository (pause ${found.pauseId})`);
      }
      return;
    }
    if (rec.state !== 'paused' || !rec.pauseId || (await this.d.pauses.claim(rec.pauseId))) return;
    await this.mutex.run(id, async () => {
      const cur = this.find(id);
      if (cur?.state !== 'paused' || cur.pauseId !== rec.pauseId) return;
      this.d.store.delete(id);
      if (cur.captureDir) await rm(path.join(this.d.capturesDir, id), { recursive: true, force: true });
      this.logs.drop(id);
    });
    throw notFound(`sandbox ${id} was resumed or removed on another node`);
  }

  private extend(rec: SandboxRecord, secs: number, mode: 'extend' | 'set'): void {
    const end = addSeconds(new Date(), secs);
    if (mode === 'set' || end > rec.endAt) this.d.store.update({ ...rec, endAt: end });
  }

  private async resumeWork(rec: SandboxRecord, timeoutSecs: number): Promise<SandboxRecord> {
    const local = rec.captureDir && existsSync(path.join(rec.captureDir, 'capture.json'));
    if (!local && !rec.pauseId)
      throw new DomainError('internal', `paused sandbox ${rec.sandboxId} has no capture`);
    const opened = local ? undefined : await this.d.pauses.open(rec.pauseId!);
    let live: Live;
    try {
      live = await this.restoreInto(opened?.capture ?? rec.captureDir!, rec);
    } finally {
      opened?.release();
    }
    this.live.set(rec.sandboxId, live);
    // A local capture is obsolete once the sandbox runs on from it; the repository's pause stays
    // as the parent of the next one.
    if (rec.captureDir) await rm(path.dirname(rec.captureDir), { recursive: true, force: true });
    this.logs.add(rec.sandboxId, 'sandbox resumed');
    const { captureDir: _c, ...rest } = rec;
    return { ...rest, state: 'running', handle: live.handle, endAt: addSeconds(new Date(), timeoutSecs) };
  }

  /** A sandbox restored from `capture` with the record's resources, in a fresh network slot. */
  private async restoreInto(capture: Capture | string, rec: SandboxRecord): Promise<Live> {
    const slot = await this.d.slots.acquire(rec.egress);
    try {
      const handle = await this.d.driver.restore({
        capture,
        resources: { cpuCount: rec.cpuCount, memoryMB: rec.memoryMB, diskSizeMB: rec.diskSizeMB },
        net: slot,
      });
      return { handle, slot };
    } catch (err) {
      await this.d.slots.release(slot).catch(() => undefined);
      throw err;
    }
  }

  async kill(id: string): Promise<void> {
    await this.transition(id, 'kill', async (rec) => {
      const live = this.live.get(id);
      this.live.delete(id);
      if (live) {
        await this.drainConnections(id);
        await this.d.driver.kill(live.handle);
        await this.d.slots.release(live.slot);
      }
      if (rec.captureDir) await rm(path.join(this.d.capturesDir, id), { recursive: true, force: true });
      if (rec.pauseId) await this.dropPause(id, rec.pauseId);
      this.logs.drop(id);
      return 'deleted';
    });
  }

  /** POST /timeout: end = now + secs, which may shorten it. */
  async setTimeout(id: string, secs: number): Promise<void> {
    await this.mutex.run(id, async () => {
      const rec = this.get(id);
      if (rec.state !== 'running') throw conflict(`sandbox ${id} is ${rec.state}`);
      this.extend(rec, secs, 'set');
    });
  }

  /** POST /refreshes: extend only. */
  async refresh(id: string, secs: number): Promise<void> {
    await this.mutex.run(id, async () => {
      const rec = this.get(id);
      if (rec.state !== 'running') throw conflict(`sandbox ${id} is ${rec.state}`);
      this.extend(rec, secs, 'extend');
    });
  }

  async setNetwork(id: string, egress: EgressRules): Promise<void> {
    await this.mutex.run(id, async () => {
      const rec = this.get(id);
      if (isTransient(rec.state)) throw conflict(`sandbox ${id} is ${rec.state}`);
      const live = this.live.get(id);
      if (live) await this.d.slots.setEgress(live.slot, egress);
      this.d.store.update({ ...rec, egress });
    });
  }

  private mustLive(id: string): Live {
    const live = this.live.get(id);
    if (!live) throw new DomainError('internal', `sandbox ${id} is not live on this node`);
    return live;
  }

  // ---- background work ----

  /** Pauses (or kills, with autoPause false) running sandboxes whose end time has passed. */
  startTtlLoop(intervalMs = 1000): void {
    this.ttlTimer = setInterval(() => this.expire(), intervalMs);
    this.ttlTimer.unref();
  }

  private expire(): void {
    const now = new Date().toISOString();
    for (const rec of this.d.store.all()) {
      if (rec.state !== 'running' || rec.endAt > now || this.expiring.has(rec.sandboxId)) continue;
      this.expiring.add(rec.sandboxId);
      const op = rec.autoPause ? this.pause(rec.sandboxId) : this.kill(rec.sandboxId);
      void op
        .then(() =>
          this.d.logger.info({ sandboxId: rec.sandboxId }, rec.autoPause ? 'ttl paused' : 'ttl killed'),
        )
        .catch((err) => this.d.logger.warn({ err, sandboxId: rec.sandboxId }, 'ttl action failed'))
        .finally(() => this.expiring.delete(rec.sandboxId));
    }
  }

  private async onRuntimeExit(runtimeId: string, reason: string): Promise<void> {
    const pooled = this.d.pool?.forget(runtimeId);
    if (pooled) {
      await this.d.slots.release(pooled.slot).catch(() => undefined);
      this.d.logger.warn({ reason }, 'a pooled sandbox died');
      return;
    }
    for (const [id, live] of this.live) {
      if (live.handle.id !== runtimeId) continue;
      this.live.delete(id);
      await this.d.slots.release(live.slot).catch(() => undefined);
      this.d.logger.error({ sandboxId: id, reason }, 'sandbox died');
      this.d.observer.failed('runtime');
      const rec = this.d.store.get(id);
      if (rec && rec.state === 'running') {
        this.d.store.delete(id);
        this.d.observer.event?.({ type: 'exited', sandboxId: id, reason });
        if (rec.pauseId) await this.dropPause(id, rec.pauseId);
      }
    }
  }

  /** The repository's pause of a sandbox that is gone for good. */
  private async dropPause(sandboxId: string, pauseId: string): Promise<void> {
    await this.d.pauses
      .drop(pauseId)
      .catch((err) => this.d.logger.warn({ err, sandboxId, pauseId }, 'dropping the pause failed'));
  }

  /**
   * After a restart: paused sandboxes stay paused; a pause or resume cut short is resolved from
   * what is on disk and in the repository (a complete local capture, or else a stored pause,
   * means paused); everything else was running in the old process and is lost, since the runtime
   * reclaimed its processes on start. Lost sandboxes' stored pauses are dropped in the background.
   */
  recover(): { paused: number; lost: string[] } {
    const lost: string[] = [];
    let paused = 0;
    for (const rec of this.d.store.all()) {
      // While pausing, captureDir is set until the repository holds the new pause: a pauseId
      // next to it is the previous one, not the state to resume from.
      const resumable = rec.captureDir
        ? existsSync(path.join(rec.captureDir, 'capture.json'))
        : rec.pauseId !== undefined;
      if ((rec.state === 'paused' || rec.state === 'pausing' || rec.state === 'resuming') && resumable) {
        const { handle: _h, ...rest } = rec;
        this.d.store.compareAndSet({ ...rest, state: 'paused' }, rec.state);
        paused++;
      } else {
        this.d.store.delete(rec.sandboxId);
        void rm(path.join(this.d.capturesDir, rec.sandboxId), { recursive: true, force: true });
        if (rec.pauseId) void this.dropPause(rec.sandboxId, rec.pauseId);
        lost.push(rec.sandboxId);
      }
    }
    return { paused, lost };
  }

  /** SIGTERM: stop taking work and pause every running sandbox, so it resumes after a restart. */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    if (this.ttlTimer) clearInterval(this.ttlTimer);
    const running = this.d.store.all().filter((r) => r.state === 'running');
    await this.d.pool?.close();
    await forEachLimit(running, 4, (r) =>
      this.pause(r.sandboxId).catch((err) =>
        this.d.logger.error({ err, sandboxId: r.sandboxId }, 'pause at shutdown failed'),
      ),
    );
    this.offExit();
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  get liveCount(): number {
    return this.live.size;
  }

  /** Guard for request inputs the orchestrator itself defines. */
  static checkTimeout(secs: number, field = 'timeout'): number {
    if (!Number.isInteger(secs) || secs < 1 || secs > 86_400 * 30) {
      throw invalid(`${field} must be an integer number of seconds between 1 and 2592000`);
    }
    return secs;
  }
}

/** Operations whose success is a lifecycle event of its own (snapshot and fork report theirs). */
const OP_EVENT: Partial<Record<Operation, LifecycleEventType>> = {
  pause: 'paused',
  resume: 'resumed',
  kill: 'killed',
};

/** Typed errors the API maps itself (repository unavailable, name taken, …) pass through. */
function operationError(op: string, err: unknown): Error {
  if (err instanceof DomainError || err instanceof SnapshotError) return err;
  return new DomainError('internal', `${op} failed: ${(err as Error).message}`);
}
