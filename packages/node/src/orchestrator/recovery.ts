import type { SandboxCore } from './core.js';
import type { SandboxRecord } from './record.js';

/**
 * What a record found at start means. Paused sandboxes stay paused; a pause or resume cut short
 * is paused when its state is somewhere to resume from: the complete local capture it names, or
 * else its pause in the repository. (While a pause is being stored, captureDir is set until the
 * repository holds the new pause, so a pauseId beside it is the previous pause, not the state.)
 * Everything else was running in the old process and is lost: the runtime reclaimed its
 * processes when the node started.
 */
export function recoveryOf(rec: SandboxRecord, localCaptureComplete: boolean): 'paused' | 'lost' {
  const resumable = rec.captureDir ? localCaptureComplete : rec.pauseId !== undefined;
  const pausedOrBetween = rec.state === 'paused' || rec.state === 'pausing' || rec.state === 'resuming';
  return pausedOrBetween && resumable ? 'paused' : 'lost';
}

/**
 * After a restart: resolves every record (recoveryOf). Lost sandboxes' records go at once; their
 * local captures and stored pauses are dropped in the background.
 */
export function recover(core: SandboxCore): { paused: number; lost: string[] } {
  const { d } = core;
  const lost: string[] = [];
  let paused = 0;
  for (const rec of d.store.all()) {
    const local = rec.captureDir !== undefined && d.captures.complete(rec.captureDir);
    if (recoveryOf(rec, local) === 'paused') {
      const { handle: _h, ...rest } = rec;
      d.store.compareAndSet({ ...rest, state: 'paused' }, rec.state);
      paused++;
      continue;
    }
    d.store.delete(rec.sandboxId);
    void core.background.run('reclaim-lost', rec.sandboxId, () => core.reclaimRemains(rec));
    core.emit('lost', rec.sandboxId, 'node_restart');
    lost.push(rec.sandboxId);
  }
  return { paused, lost };
}
