import { conflict } from '@agentenv/common';
import type { EgressRules } from '../network/index.js';
import type { EndTimeMode, SandboxCore } from './core.js';
import { isTransient } from './states.js';

/** What changes on a sandbox without a transition: its end time and its egress rules. */
export class Settings {
  constructor(private readonly core: SandboxCore) {}

  /** POST /timeout sets the end time (it may shorten it); /refreshes only extends it. */
  async endTime(id: string, secs: number, mode: EndTimeMode): Promise<void> {
    await this.core.mutex.run(id, async () => {
      const rec = this.core.get(id);
      if (rec.state !== 'running') throw conflict(`sandbox ${id} is ${rec.state}`);
      this.core.setEndTime(rec, secs, mode);
    });
  }

  async setNetwork(id: string, egress: EgressRules): Promise<void> {
    await this.core.mutex.run(id, async () => {
      const rec = this.core.get(id);
      if (isTransient(rec.state)) throw conflict(`sandbox ${id} is ${rec.state}`);
      // A suspended sandbox keeps its slot, and runs on in it if resumed before it is stopped.
      const live = this.core.live.get(id) ?? this.core.suspended.get(id)?.live;
      if (live) await this.core.d.slots.setEgress(live.slot, egress);
      this.core.d.store.update({ ...rec, egress });
    });
  }
}
