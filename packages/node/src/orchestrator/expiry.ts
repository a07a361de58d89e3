import { isoTime } from '../util/index.js';
import type { SandboxCore } from './core.js';
import type { LifecycleReason } from './observer.js';
import type { PauseKind, SandboxRecord } from './record.js';

/** Whether a sandbox's end time has passed: only running sandboxes expire (paused ones live on). */
export function hasExpired(rec: SandboxRecord, now: number): boolean {
  return rec.state === 'running' && Date.parse(rec.endAt) <= now;
}

/** What expiry does to a sandbox: pause it (autoPause, the default; without memory when asked) or kill it. */
export type ExpiryAction = 'kill' | { pause: PauseKind };

export function expiryAction(rec: SandboxRecord): ExpiryAction {
  if (!rec.autoPause) return 'kill';
  return { pause: rec.autoPauseMemory === false ? 'filesystem' : 'memory' };
}

export interface ExpiryActions {
  pause(id: string, reason: LifecycleReason, kind: PauseKind): Promise<void>;
  kill(id: string, reason: LifecycleReason): Promise<void>;
}

const EXPIRE_TASK = 'ttl-expire';

/** The TTL loop: every interval, each expired running sandbox is paused or killed. */
export class Expiry {
  constructor(
    private readonly core: SandboxCore,
    private readonly act: ExpiryActions,
  ) {}

  start(intervalMs: number): void {
    this.core.background.every('ttl-sweep', intervalMs, () => this.sweep());
  }

  /** Starts the action for each expired sandbox that has none under way yet. */
  sweep(): void {
    const { background, clock, d } = this.core;
    const now = clock.now();
    for (const rec of d.store.expiredBy(isoTime(now))) {
      if (!hasExpired(rec, now)) continue;
      const id = rec.sandboxId;
      if (background.pending(id).some((t) => t.name === EXPIRE_TASK)) continue;
      void background.run(EXPIRE_TASK, id, async () => {
        const action = expiryAction(rec);
        if (action === 'kill') await this.act.kill(id, 'timeout');
        else await this.act.pause(id, 'timeout', action.pause);
        d.logger.info({ sandboxId: id, action }, action === 'kill' ? 'ttl killed' : 'ttl paused');
      });
    }
  }
}
