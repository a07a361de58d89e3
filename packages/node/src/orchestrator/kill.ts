import type { SandboxCore } from './core.js';
import type { LifecycleReason } from './observer.js';

/** Kill: stop the sandbox and release everything it holds, here and in the repository. */
export class Killer {
  constructor(private readonly core: SandboxCore) {}

  async kill(id: string, reason: LifecycleReason): Promise<void> {
    const { d } = this.core;
    await this.core.transition(id, 'kill', async (rec) => {
      const live = this.core.live.get(id);
      if (live) {
        await this.core.drainConnections(id);
        // Live until the runtime let go of it: a failed kill leaves the sandbox as it was.
        await d.driver.kill(live.handle);
        this.core.live.delete(id);
        await this.core.releaseSlot(live.slot, id);
      }
      await this.core.reclaimRemains(rec);
      return 'deleted';
    });
    this.core.emit('killed', id, reason);
  }
}
