import type { SandboxExit } from '../runtime/index.js';
import type { Live, SandboxCore } from './core.js';

/**
 * Sandboxes that died on their own (envd or the runtime crashed): their slot is released and
 * their record removed, since nothing of their state is left to resume. Handled under the
 * sandbox's lock, after whatever operation was running on it.
 */
export class Exits {
  constructor(private readonly core: SandboxCore) {}

  /** Follows the driver's exit reports; returns the unsubscribe function. */
  listen(): () => void {
    return this.core.d.driver.onExit(
      (exit) =>
        void this.core.background.run('runtime-exit', this.sandboxOf(exit.id), () => this.onExit(exit)),
    );
  }

  private sandboxOf(runtimeId: string): string | undefined {
    for (const [id, live] of this.core.live) if (live.handle.id === runtimeId) return id;
    for (const [id, held] of this.core.suspended) if (held.live.handle.id === runtimeId) return id;
    return undefined;
  }

  private async onExit(exit: SandboxExit): Promise<void> {
    const { d } = this.core;
    const pooled = d.pool?.forget(exit.id);
    if (pooled) {
      await this.core.releaseSlot(pooled.slot);
      d.logger.warn({ reason: exit.reason }, 'a pooled sandbox died');
      return;
    }
    const id = this.sandboxOf(exit.id);
    if (!id) return;
    await this.core.mutex.run(id, async () => {
      const live = this.core.live.get(id);
      const held = this.core.suspended.get(id);
      if (live?.handle.id === exit.id) {
        this.core.live.delete(id);
        await this.dead(id, live, exit, 'running');
      } else if (held?.live.handle.id === exit.id) {
        // With its pause's checkpoint complete, the pause goes on as if it had been stopped
        // (Pauser.afterCapture); without one, nothing of it is left to resume.
        if (await held.captured) return;
        this.core.suspended.delete(id);
        await this.dead(id, held.live, exit, 'paused');
      }
    });
  }

  /** Gives back the slot of a sandbox that died and, when its record is `state`, drops it. */
  private async dead(id: string, live: Live, exit: SandboxExit, state: 'running' | 'paused'): Promise<void> {
    const { d } = this.core;
    await this.core.releaseSlot(live.slot, id);
    d.logger.error({ sandboxId: id, reason: exit.reason }, 'sandbox died');
    d.observer.failed('runtime');
    const rec = d.store.get(id);
    if (rec?.state !== state) return;
    d.store.delete(id);
    await this.core.reclaimRemains(rec);
    this.core.emit('exited', id, 'runtime_exit', { reason: exit.reason });
  }
}
