import type { SandboxCore } from './core.js';

/** The longest the idle sweep waits between looks. */
const SWEEP_MAX_MS = 1000;

const FREEZE_TASK = 'idle-freeze';

/**
 * Freezes running sandboxes nobody uses and thaws them on their next use. Idle means: no
 * request through the proxy open (a running command streams its output through one, so a
 * command keeps its sandbox awake) and no traffic, call or lifecycle change for `idleMs`, as the
 * ActivityTracker counts it. A frozen sandbox uses no CPU at all (the driver stops every one of
 * its processes) and keeps its memory; its stored state stays `running`, since clients never see
 * the difference beyond a little latency on the request that wakes it.
 *
 * Freeze and thaw run under the sandbox's lock, so they never overlap an operation on it; the
 * freeze looks again under the lock, so a request that came in since the sweep keeps it awake.
 */
export class IdleFreezer {
  /** Sandboxes frozen here → the runtime handle frozen (a resumed sandbox has a new one). */
  private readonly frozen = new Map<string, string>();
  /** Sandboxes the sweep decided to freeze whose freeze has not finished. */
  private readonly freezing = new Set<string>();

  constructor(
    private readonly core: SandboxCore,
    private readonly idleMs: number,
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
    for (const id of this.core.live.keys()) {
      if (this.frozen.has(id) || this.freezing.has(id) || !this.idleLongEnough(id)) continue;
      this.freezing.add(id);
      void this.core.background
        .run(FREEZE_TASK, id, () => this.freeze(id))
        .finally(() => this.freezing.delete(id));
    }
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

  private idleLongEnough(id: string): boolean {
    if (this.core.d.store.get(id)?.state !== 'running') return false;
    const idle = this.core.activity.idleFor(id);
    // Never seen by the tracker (recovered, or created before it counted): idle from now.
    if (idle === undefined) this.core.activity.touch(id);
    return idle !== undefined && idle >= this.idleMs;
  }

  private freeze(id: string): Promise<void> {
    return this.core.mutex.run(id, async () => {
      const live = this.core.live.get(id);
      if (!live || !this.idleLongEnough(id)) return;
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
