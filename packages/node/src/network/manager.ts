import { IndexAllocator, slotAddresses } from './addressing.js';
import { resolveNetworkConfig, type NetworkConfig, type ResolvedNetworkConfig } from './config.js';
import { consoleWarnLogger, createContext, type NetContext, type NetworkLogger } from './context.js';
import { sameEgress, validateEgressRules } from './egress.js';
import { detectEnvironment, requireRoot, resolveTools, type NetworkEnvironment } from './environment.js';
import { NetworkError } from './errors.js';
import { checkRangeFree, enableForwarding, installRootRules, reclaim, restoreForwarding } from './host.js';
import { ManagedSlot } from './managed-slot.js';
import { slotNames } from './naming.js';
import { WarmPool } from './pool.js';
import { createSlotNetwork } from './slot-ops.js';
import type { EgressRules, NetSlot } from './slot.js';

export interface NetworkManagerOptions extends Partial<NetworkConfig> {
  logger?: NetworkLogger;
}

export interface NetworkStats {
  /** Slots handed out by acquire() and not released yet. */
  readonly live: number;
  /** Ready slots waiting in the warm pool. */
  readonly pooled: number;
  /** Most slots that can exist at once. */
  readonly capacity: number;
}

/**
 * Owns this node's sandbox networking: the shared root-namespace rules, every slot, and the warm
 * pool. One per node process; its tag keeps it out of other node processes' way.
 */
export class NetworkManager {
  readonly config: ResolvedNetworkConfig;
  readonly environment: NetworkEnvironment;
  readonly #ctx: NetContext;
  readonly #changedForwarding: boolean;
  readonly #allocator: IndexAllocator;
  readonly #pool: WarmPool<ManagedSlot>;
  /** Every slot that exists: pooled or handed out. */
  readonly #slots = new Set<ManagedSlot>();
  /** Every slot this manager ever created, to tell "released already" from "not ours". */
  readonly #created = new WeakSet<ManagedSlot>();
  readonly #pending = new Set<Promise<unknown>>();
  #shutdown: Promise<void> | undefined;

  private constructor(ctx: NetContext, environment: NetworkEnvironment, changedForwarding: boolean) {
    this.#ctx = ctx;
    this.config = ctx.config;
    this.environment = environment;
    this.#changedForwarding = changedForwarding;
    this.#allocator = new IndexAllocator(ctx.config.capacity);
    this.#pool = new WarmPool({
      size: ctx.config.poolSize,
      create: () => this.#createSlot(ctx.config.defaultEgress),
      destroy: (slot) => this.#discard(slot),
      onError: (error) => ctx.logger.warn({ err: error }, 'could not refill the network slot pool'),
    });
  }

  /**
   * Checks the host, removes what a crashed node with the same tag left behind, installs the
   * root-namespace rules and starts filling the pool.
   */
  static async create(options: NetworkManagerOptions = {}): Promise<NetworkManager> {
    const { logger = consoleWarnLogger, ...rest } = options;
    const config = resolveNetworkConfig(rest);
    requireRoot();
    const tools = await resolveTools(config.iptables);
    const environment = await detectEnvironment(tools);
    for (const warning of environment.warnings) logger.warn({}, warning);
    const ctx = createContext(config, tools, logger);
    const reclaimed = await reclaim(ctx);
    if (reclaimed.namespaces + reclaimed.links + reclaimed.chains > 0) {
      logger.warn(
        { ...reclaimed, nodeTag: config.nodeTag },
        'removed network leftovers of a previous node process',
      );
    }
    await checkRangeFree(ctx);
    const changedForwarding = await enableForwarding();
    try {
      await installRootRules(ctx);
    } catch (error) {
      await reclaim(ctx).catch(() => undefined);
      if (changedForwarding) await restoreForwarding(ctx).catch(() => undefined);
      throw error;
    }
    logger.info(
      { nodeTag: config.nodeTag, hostRange: config.hostRange, iptables: tools.flavour, changedForwarding },
      'sandbox networking ready',
    );
    const manager = new NetworkManager(ctx, environment, changedForwarding);
    manager.#pool.fill();
    return manager;
  }

  /**
   * A slot with the given egress rules (default: config.defaultEgress), from the pool when one is
   * ready. Invalid rules are rejected before any slot is touched.
   */
  async acquire(egress?: EgressRules): Promise<ManagedSlot> {
    this.#assertOpen();
    const rules = egress === undefined ? this.config.defaultEgress : validateEgressRules(egress);
    return this.#track(async () => {
      const pooled = this.#pool.take();
      const slot = pooled ?? (await this.#createSlot(rules));
      try {
        if (!sameEgress(slot.egress, rules)) await slot.applyEgress(rules);
        this.#assertOpen();
      } catch (error) {
        await this.#discard(slot).catch(() => undefined);
        throw error;
      }
      return slot;
    });
  }

  /** Replaces a slot's egress rules in one transaction; open connections are re-checked too. */
  async setEgress(slot: NetSlot, rules: EgressRules): Promise<void> {
    const managed = this.#own(slot);
    await managed.applyEgress(validateEgressRules(rules));
  }

  /**
   * Gives a slot back once its sandbox is gone: reset and kept in the pool when the pool has room
   * (and the host has conntrack to make the router forget the old connections), else torn down.
   * Releasing a slot twice is a no-op.
   */
  async release(slot: NetSlot): Promise<void> {
    const managed = this.#own(slot);
    if (managed.released) return;
    const { conntrack } = this.#ctx.tools;
    if (conntrack && this.#pool.hasRoom && !this.#shutdown) {
      const next = await this.#track(() => this.#recycle(managed, conntrack));
      if (next && this.#pool.put(next)) return;
      // Not kept, and not torn down already by a shutdown that began meanwhile.
      if (next) return next.released ? undefined : this.#discard(next);
    }
    await this.#discard(managed);
    this.#pool.fill();
  }

  /** The slot's network under a new handle, reset for another sandbox; undefined if that failed. */
  async #recycle(slot: ManagedSlot, conntrack: string): Promise<ManagedSlot | undefined> {
    try {
      const next = await slot.recycle(conntrack, this.config.defaultEgress);
      this.#slots.delete(slot);
      this.#slots.add(next);
      this.#created.add(next);
      return next;
    } catch (error) {
      this.#ctx.logger.warn({ err: error, index: slot.index }, 'could not reset a released network slot');
      return undefined;
    }
  }

  stats(): NetworkStats {
    return {
      live: this.#slots.size - this.#pool.ready,
      pooled: this.#pool.ready,
      capacity: this.config.capacity,
    };
  }

  /** Resolves when the pool has nothing in flight (full, or stopped by an error). */
  poolIdle(): Promise<void> {
    return this.#pool.whenIdle();
  }

  /**
   * Removes every slot, the root-namespace rules and (if this node turned it on and no AgentENV
   * namespace remains) ip_forward. Tries everything, then reports what failed.
   */
  shutdown(): Promise<void> {
    this.#shutdown ??= this.#doShutdown();
    return this.#shutdown;
  }

  async #doShutdown(): Promise<void> {
    const failures: unknown[] = [];
    await this.#pool.close();
    await Promise.allSettled([...this.#pending]);
    const slots = [...this.#slots];
    this.#slots.clear();
    for (const result of await Promise.allSettled(slots.map((slot) => this.#discard(slot)))) {
      if (result.status === 'rejected') failures.push(result.reason);
    }
    // A final sweep by prefix catches anything a failed teardown left.
    await reclaim(this.#ctx).catch((error: unknown) => failures.push(error));
    if (this.#changedForwarding)
      await restoreForwarding(this.#ctx).catch((error: unknown) => failures.push(error));
    if (failures.length > 0) {
      const reasons = failures.map((error) => (error instanceof Error ? error.message : String(error)));
      throw new NetworkError('COMMAND_FAILED', `network shutdown incomplete: ${reasons.join('; ')}`);
    }
  }

  async #createSlot(egress: EgressRules): Promise<ManagedSlot> {
    this.#assertOpen();
    const index = this.#allocator.allocate();
    const slot = new ManagedSlot(
      this.#ctx,
      index,
      slotNames(this.config.nodeTag, index),
      slotAddresses(this.config.hostRangeCidr, index),
      egress,
    );
    this.#created.add(slot);
    try {
      await createSlotNetwork(this.#ctx, slot, egress);
    } catch (error) {
      await this.#discard(slot).catch(() => undefined);
      throw error;
    }
    this.#slots.add(slot);
    return slot;
  }

  /** Tears a slot down; its index is reused only if the teardown succeeded. */
  async #discard(slot: ManagedSlot): Promise<void> {
    this.#slots.delete(slot);
    try {
      await slot.destroy();
    } catch (error) {
      this.#ctx.logger.warn(
        { err: error, index: slot.index },
        'network slot teardown failed; index kept reserved',
      );
      throw error;
    }
    this.#allocator.release(slot.index);
  }

  #track<T>(task: () => Promise<T>): Promise<T> {
    const promise = task();
    this.#pending.add(promise);
    const forget = () => this.#pending.delete(promise);
    promise.then(forget, forget);
    return promise;
  }

  #own(slot: NetSlot): ManagedSlot {
    if (!(slot instanceof ManagedSlot) || !this.#created.has(slot)) {
      throw new NetworkError('UNKNOWN_SLOT', `network slot ${slot.index} does not belong to this node`);
    }
    return slot;
  }

  #assertOpen(): void {
    if (this.#shutdown) throw new NetworkError('SHUT_DOWN', 'the network manager has been shut down');
  }
}
