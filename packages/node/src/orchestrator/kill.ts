import type { SandboxCore } from './core.js';
import type { LifecycleReason } from './observer.js';

/**
 * Kill: stop the sandbox and answer once it is unreachable; what it held (network slot, local
 * captures) is given back in the background. The driver reclaims its own resources in the
 * background too, and admission counts them until it has (driver.releasing()).
 */
export class Killer {
  constructor(private readonly core: SandboxCore) {}

  async kill(id: string, reason: LifecycleReason): Promise<void> {
    const { d } = this.core;
    await this.core.transition(id, 'kill', async (rec) => {
      // A pause's checkpoint under way ends first: a runtime sandbox is not stopped in the middle of one.
      const held = this.core.suspended.get(id);
      if (held) await held.captured;
      const live = this.core.live.get(id) ?? held?.live;
      if (live) {
        await this.core.drainConnections(id, 'kill');
        // Live until the runtime let go of it: a failed kill leaves the sandbox as it was.
        await d.driver.kill(live.handle);
        this.core.live.delete(id);
        this.core.suspended.delete(id);
      }
      // Before the answer: once the record is gone nothing may resume the sandbox from its pause.
      const { pauseId, ...remains } = rec;
      if (pauseId) await this.core.dropPause(id, pauseId);
      void this.core.background.run('kill-reclaim', id, async () => {
        if (live) await this.core.releaseSlot(live.slot, id);
        await this.core.reclaimRemains(remains);
      });
      return 'deleted';
    });
    this.core.emit('killed', id, reason);
  }
}
