import type { SandboxExit } from '../runtime/index.js';
import type { SandboxCore } from './core.js';

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
      if (live?.handle.id !== exit.id) return;
      this.core.live.delete(id);
      await this.core.releaseSlot(live.slot, id);
      d.logger.error({ sandboxId: id, reason: exit.reason }, 'sandbox died');
      d.observer.failed('runtime');
      const rec = d.store.get(id);
      if (rec?.state !== 'running') return;
      d.store.delete(id);
      await this.core.reclaimRemains(rec);
      this.core.emit('exited', id, 'runtime_exit', { reason: exit.reason });
    });
  }
}
