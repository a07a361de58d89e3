import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { initDefaults, type EnvdConnector } from '../envd/index.js';
import type { NetSlot } from '../network/index.js';
import type { Capture, RuntimeDriver, SandboxHandle } from '../runtime/index.js';
import type { CaptureDirs, HostMemory, ResolvedTemplate, SlotProvider } from './seams.js';

export interface PooledSandbox {
  handle: SandboxHandle;
  slot: NetSlot;
}

/** Memory to leave free for running sandboxes before the pool takes more (bytes). */
const RESERVE_BYTES = 2 * 2 ** 30;

export interface WarmPoolOptions {
  /** Waiting sandboxes per template; 0 turns the pool off. */
  size: number;
  driver: RuntimeDriver;
  slots: SlotProvider;
  /** Refills stop while the host has less than a reserve plus a sandbox's memory available. */
  memory: HostMemory;
  /** Whether a template's capture is still there (a deleted template's cache entry is gone). */
  captures: Pick<CaptureDirs, 'complete'>;
  /** Each pooled sandbox gets an /init once restored (see refill). */
  envd: EnvdConnector;
  logger: Logger;
}

/**
 * Sandboxes already restored from a template's ready state and waiting, frozen, so a create is a
 * thaw, an assignment and /init. Nothing per-sandbox (ids, tokens, env vars) is in them: that arrives with
 * /init at assignment. Refilled in the background, and only while the machine has memory to spare.
 */
export class SandboxWarmPool {
  private readonly ready = new Map<string, PooledSandbox[]>();
  /** Refills under way, by pool key: close() waits for them, or a restore finishing late would outlive the node. */
  private readonly filling = new Map<string, Promise<void>>();
  private closed = false;

  constructor(private readonly opts: WarmPoolOptions) {}

  /**
   * A waiting sandbox of the template, if any (frozen: the taker thaws it). The taker calls fill()
   * once its create is done.
   */
  take(template: ResolvedTemplate): PooledSandbox | undefined {
    this.sweep(template);
    return this.ready.get(poolKey(template))?.shift();
  }

  fill(template: ResolvedTemplate): void {
    const key = poolKey(template);
    if (this.closed || this.opts.size === 0 || !template.capture || this.filling.has(key)) return;
    const refill = this.refill({ ...template, capture: template.capture })
      .catch((err) =>
        this.opts.logger.warn({ err, template: template.templateId }, 'warm pool refill failed'),
      )
      .finally(() => this.filling.delete(key));
    this.filling.set(key, refill);
  }

  private async refill(template: ResolvedTemplate & { capture: Capture }): Promise<void> {
    const list = this.ready.get(poolKey(template)) ?? [];
    this.ready.set(poolKey(template), list);
    while (!this.closed && list.length < this.opts.size) {
      if ((await this.opts.memory.availableBytes()) < RESERVE_BYTES + template.defaults.memoryMB * 2 ** 20)
        return;
      const slot = await this.opts.slots.acquire({ allowInternet: true, allowOut: [], denyOut: [] });
      try {
        const handle = await this.opts.driver.restore({
          capture: template.capture,
          resources: template.defaults,
          net: slot,
        });
        // The first /init after a restore reads and writes envd's files (boot id, user database)
        // through gVisor's gofer for the first time: ~40-60 ms that the handout's /init then
        // no longer pays. Everything it sets, the handout's /init sets again.
        // Then frozen while it waits: a restored sandbox left running uses CPU (its sentry's
        // timers) for as long as no create comes; the handout thaws it (~12 ms).
        const ready =
          (await this.succeeds(
            () =>
              this.opts
                .envd(slot.hostAddress, handle.envdPort)
                .init(
                  { envVars: {}, ...initDefaults(template.sandboxDefaults), bootId: randomUUID() },
                  template.envdToken,
                ),
            'the envd of a pooled sandbox refused /init',
          )) &&
          (await this.succeeds(() => this.opts.driver.freeze(handle), 'freezing a pooled sandbox failed'));
        if (this.closed || !ready) {
          await this.opts.driver.kill(handle);
          await this.opts.slots.release(slot);
          return;
        }
        list.push({ handle, slot });
      } catch (err) {
        await this.opts.slots.release(slot).catch(() => undefined);
        throw err;
      }
    }
  }

  /** Runs one step of readying a pooled sandbox; a failure is logged as `failure` and gives false. */
  private succeeds(step: () => Promise<unknown>, failure: string): Promise<boolean> {
    return step().then(
      () => true,
      (err: unknown) => {
        this.opts.logger.warn({ err }, failure);
        return false;
      },
    );
  }

  /** Waiting sandboxes per template id. */
  sizes(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [key, l] of this.ready) {
      const t = key.slice(0, key.indexOf('@'));
      out[t] = (out[t] ?? 0) + l.length;
    }
    return out;
  }

  /** Whether a runtime sandbox is one of ours (a pooled sandbox that died is dropped). */
  forget(runtimeId: string): PooledSandbox | undefined {
    for (const list of this.ready.values()) {
      const i = list.findIndex((p) => p.handle.id === runtimeId);
      if (i >= 0) return list.splice(i, 1)[0];
    }
    return undefined;
  }

  /**
   * Kills the waiting sandboxes of captures that were replaced (the template was rebuilt) or are
   * gone (it was deleted), so they do not hold memory and CPU for creates that never come.
   */
  private sweep(current: ResolvedTemplate): void {
    for (const [key, list] of this.ready) {
      if (key === poolKey(current) || this.filling.has(key)) continue;
      const at = key.indexOf('@');
      if (key.slice(0, at) !== current.templateId && this.opts.captures.complete(key.slice(at + 1))) continue;
      this.ready.delete(key);
      void this.discard(list);
    }
  }

  private async discard(list: PooledSandbox[]): Promise<void> {
    await Promise.all(
      list.map(async (p) => {
        await this.opts.driver.kill(p.handle).catch(() => undefined);
        await this.opts.slots.release(p.slot).catch(() => undefined);
      }),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.filling.values());
    const all = [...this.ready.values()].flat();
    this.ready.clear();
    await this.discard(all);
  }
}

/** A rebuilt template is a different capture: its sandboxes must not come from the old one. */
function poolKey(template: ResolvedTemplate): string {
  return `${template.templateId}@${template.capture?.dir ?? ''}`;
}
