import type { CpuUse } from '../runtime/index.js';
import type { Live, SandboxCore } from './core.js';

/** The longest the idle sweep waits between looks. */
const SWEEP_MAX_MS = 1000;

const FREEZE_TASK = 'idle-freeze';

/** A sandbox's CPU is measured over the last half to whole of this before it counts as idle. */
const CPU_WINDOW_MS = 2000;

/**
 * A thread runnable for this share of a window wanted a whole CPU all along: a job that the
 * host's other work kept from running, not a sandbox at rest (whose threads sleep between their
 * short wakeups). Measured under a host loaded with 12 busy sessions a core: a busy loop's thread
 * 94-110 %, an idle sandbox's busiest thread 12-84 %.
 */
const RUNNABLE_SHARE = 0.9;

/** A reading of a sandbox's CPU use, taken while no request reached it since `idleSince`. */
interface CpuReading {
  idleSince: number;
  at: number;
  use: CpuUse;
  /** Whether `use` has its threads' figures (they are read only where the CPU leaves it open). */
  threads: boolean;
}

/**
 * Whether the sandbox did more than idle between the reading `from` and `use` at `now`: its
 * processes used more than `pct` % of one core, or one of its threads was runnable nearly all
 * along (a job starved by a loaded host uses little CPU yet is busy). A gVisor sandbox that runs
 * nothing uses a few % of a core (runsc's systrap platform wakes every 400 µs), so the bar sits
 * above that.
 */
export function busierThan(pct: number, from: CpuReading, now: number, use: CpuUse): boolean {
  const ns = (now - from.at) * 1e6;
  if (ns <= 0) return false;
  if ((use.cpuNs - from.use.cpuNs) / ns > pct / 100) return true;
  for (const [tid, runnable] of use.runnableNs) {
    const before = from.use.runnableNs.get(tid);
    if (before !== undefined && (runnable - before) / ns >= RUNNABLE_SHARE) return true;
  }
  return false;
}

/**
 * Freezes running sandboxes nobody uses and thaws them on their next use. Idle means: no
 * request through the proxy open (a running command streams its output through one, so a
 * command keeps its sandbox awake) and no traffic, call or lifecycle change for `idleMs`, as the
 * ActivityTracker counts it, and, with `cpuPct` above 0, no more CPU than that over the last
 * CPU_WINDOW_MS of it and no thread wanting a whole CPU (busierThan): a job left running in the
 * sandbox (a build, a server's own work, a `nohup` loop) keeps it awake, as it would keep running
 * on E2B, also while the host's other work leaves it little CPU. A frozen sandbox uses no CPU at
 * all (the driver stops every one of its processes) and keeps its memory; its stored state stays
 * `running`, since clients never see the difference beyond a little latency on the request that
 * wakes it.
 *
 * Freeze and thaw run under the sandbox's lock, so they never overlap an operation on it; the
 * freeze looks again under the lock, so a request that came in since the sweep keeps it awake.
 */
export class IdleFreezer {
  /** Sandboxes frozen here → the runtime handle frozen (a resumed sandbox has a new one). */
  private readonly frozen = new Map<string, string>();
  /** Sandboxes the sweep is looking at (their CPU) or freezing, until it is done. */
  private readonly freezing = new Set<string>();
  /** The CPU time of sandboxes close to idle, to tell a quiet one from one running a job. */
  private readonly cpu = new Map<string, CpuReading>();

  constructor(
    private readonly core: SandboxCore,
    private readonly idleMs: number,
    private readonly cpuPct = 0,
  ) {}

  /** Starts the periodic sweep; nothing happens when freezing is off (idleMs 0). */
  start(): void {
    if (this.idleMs <= 0) return;
    this.core.background.every('idle-sweep', Math.min(SWEEP_MAX_MS, this.idleMs), () => this.sweep());
  }

  /** Whether the sandbox is frozen now (by this freezer). */
  isFrozen(id: string): boolean {
    const handle = this.frozen.get(id);
    return handle !== undefined && handle === this.core.live.get(id)?.handle.id;
  }

  /** Starts a freeze for each running sandbox idle long enough. */
  sweep(): void {
    for (const [id, handle] of this.frozen)
      if (this.core.live.get(id)?.handle.id !== handle) this.frozen.delete(id);
    for (const id of this.cpu.keys()) if (!this.core.live.has(id) || this.frozen.has(id)) this.cpu.delete(id);
    // With CPU counted, its reading starts one window before the idle time is up, to freeze on time.
    const window = this.cpuPct > 0 ? Math.min(CPU_WINDOW_MS, this.idleMs) : 0;
    for (const id of this.core.live.keys()) {
      if (this.frozen.has(id) || this.freezing.has(id)) continue;
      const idle = this.requestIdleFor(id);
      if (idle === undefined || idle < this.idleMs - window) continue;
      this.freezing.add(id);
      void this.core.background
        .run(FREEZE_TASK, id, () => this.freeze(id, window))
        .finally(() => this.freezing.delete(id));
    }
  }

  /**
   * Whether the sandbox used at most cpuPct of a core since a reading taken at least half a
   * `window` ago in the same request-idle stretch; the first look only takes that reading, and a
   * busy sandbox gets a new one. True when CPU does not count or the driver cannot tell.
   */
  private async quiet(id: string, live: Live, window: number): Promise<boolean> {
    if (window === 0) return true;
    const idleSince = this.core.activity.quietSince(id);
    if (idleSince === undefined) return false;
    const { clock } = this.core;
    const read = async (threads: boolean): Promise<CpuReading | null> => {
      const use = await this.core.d.driver.cpuUse(live.handle, { threads }).catch(() => null);
      return use && { idleSince, at: clock.now(), use, threads };
    };
    const from = this.cpu.get(id);
    if (!from || from.idleSince !== idleSince) {
      const first = await read(true);
      if (first === null) return true;
      this.cpu.set(id, first);
      return false;
    }
    const t = clock.now();
    if (t - idleSince < this.idleMs || t - from.at < window / 2) return false;
    // The CPU figure first: a job using its share of a core is busy without its threads' files
    // (one per host thread) being read each second it runs.
    const cpu = await read(false);
    if (cpu === null) return true;
    const now = busierThan(this.cpuPct, from, cpu.at, cpu.use) ? cpu : await read(true);
    if (now === null) return true;
    // Judged on threads only against a reading that has them; after a busy one, this is the next.
    if (now !== cpu && from.threads && !busierThan(this.cpuPct, from, now.at, now.use)) return true;
    this.cpu.set(id, now);
    return false;
  }

  /**
   * The sandbox is about to be used (a proxied request, an API call): counts as activity and,
   * when it is frozen or being frozen, thaws it first. `use` false thaws for the node's own work
   * (a pause on timeout or for memory), which must not make the sandbox look recently used.
   * Must not be called under its lock.
   */
  async wake(id: string, use = true): Promise<void> {
    if (!this.core.live.has(id)) return;
    if (use) this.core.activity.touch(id);
    if (!this.frozen.has(id) && !this.freezing.has(id)) return;
    await this.core.mutex.run(id, () => this.thaw(id, use));
  }

  /** How long a running sandbox has had no request open or made; undefined when not running. */
  private requestIdleFor(id: string): number | undefined {
    if (this.core.d.store.get(id)?.state !== 'running') return undefined;
    const idle = this.core.activity.idleFor(id);
    // Never seen by the tracker (recovered, or created before it counted): idle from now.
    if (idle === undefined) this.core.activity.touch(id);
    return idle;
  }

  private idleLongEnough(id: string): boolean {
    const idle = this.requestIdleFor(id);
    return idle !== undefined && idle >= this.idleMs;
  }

  /**
   * Under the sandbox's lock from the sweep on, so that a thaw asked for meanwhile (a request, a
   * pause on timeout) queues behind it and finds it frozen, or finds nothing to undo.
   */
  private freeze(id: string, window: number): Promise<void> {
    return this.core.mutex.run(id, async () => {
      const live = this.core.live.get(id);
      if (!live || !(await this.quiet(id, live, window)) || !this.idleLongEnough(id)) return;
      const t0 = this.core.clock.now();
      await this.core.d.driver.freeze(live.handle);
      this.frozen.set(id, live.handle.id);
      this.core.d.observer.stage('freeze', this.core.clock.now() - t0);
    });
  }

  private async thaw(id: string, use: boolean): Promise<void> {
    const handle = this.frozen.get(id);
    const live = this.core.live.get(id);
    if (handle === undefined) return;
    if (live?.handle.id === handle) {
      const t0 = this.core.clock.now();
      await this.core.d.driver.thaw(live.handle);
      this.core.d.observer.stage('thaw', this.core.clock.now() - t0);
    }
    this.frozen.delete(id);
    if (use) this.core.activity.touch(id);
  }
}
