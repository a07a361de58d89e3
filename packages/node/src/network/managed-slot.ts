import type { SlotAddresses } from './addressing.js';
import type { NetContext } from './context.js';
import { NetworkError } from './errors.js';
import { Limiter } from '@agentenv/common';
import type { SlotNames } from './naming.js';
import {
  applyEgress,
  destroySlotNetwork,
  recycleSlotNetwork,
  resetSandboxInterface,
  type SlotSpec,
} from './slot-ops.js';
import type { EgressRules, NetSlot } from './slot.js';
import { sameEgress } from './egress.js';

/**
 * A slot as the manager hands it out. Operations on one slot (egress changes, reset, teardown) run
 * in call order, so the last setEgress wins and nothing touches a slot being torn down.
 */
export class ManagedSlot implements NetSlot, SlotSpec {
  readonly netnsPath: string;
  readonly hostAddress: string;
  readonly sandboxAddress: string;
  readonly #ctx: NetContext;
  readonly #queue = new Limiter(1);
  #egress: EgressRules;
  #released = false;

  constructor(
    ctx: NetContext,
    readonly index: number,
    readonly names: SlotNames,
    readonly addresses: SlotAddresses,
    egress: EgressRules,
  ) {
    this.#ctx = ctx;
    this.netnsPath = names.sandboxNsPath;
    this.hostAddress = addresses.hostAddress;
    this.sandboxAddress = ctx.config.sandboxAddress;
    this.#egress = egress;
  }

  /** The egress rules in force (normalised). */
  get egress(): EgressRules {
    return this.#egress;
  }

  get released(): boolean {
    return this.#released;
  }

  /** The root-namespace end of the slot's link: the source address the sandbox sees for the node. */
  get rootSideAddress(): string {
    return this.addresses.rootSide;
  }

  reset(): Promise<void> {
    return this.#queue.run(async () => {
      this.#assertLive();
      await resetSandboxInterface(this.#ctx, this);
    });
  }

  /** @internal Used by NetworkManager.setEgress after validation. */
  applyEgress(egress: EgressRules): Promise<void> {
    return this.#queue.run(async () => {
      this.#assertLive();
      // The rules in place already (a pooled slot handed out with the default ones): nothing to do.
      if (sameEgress(this.#egress, egress)) return;
      await applyEgress(this.#ctx, this, egress);
      this.#egress = egress;
    });
  }

  /**
   * @internal Used by NetworkManager.release: the same network under a new handle, reset for the
   * next sandbox (see recycleSlotNetwork) with `egress`. This handle is dead from the call on, so
   * a late setEgress by the previous holder fails instead of changing the next one's rules.
   */
  async recycle(conntrack: string, egress: EgressRules): Promise<ManagedSlot> {
    this.#released = true;
    const next = new ManagedSlot(this.#ctx, this.index, this.names, this.addresses, egress);
    await this.#queue.run(() =>
      recycleSlotNetwork(this.#ctx, this, conntrack, sameEgress(this.#egress, egress) ? null : egress),
    );
    return next;
  }

  /** @internal Used by NetworkManager.release/shutdown. Marks the slot dead first. */
  destroy(): Promise<void> {
    this.#released = true;
    return this.#queue.run(() => destroySlotNetwork(this.#ctx, this));
  }

  #assertLive(): void {
    if (this.#released) {
      throw new NetworkError('UNKNOWN_SLOT', `network slot ${this.index} has been released`);
    }
  }
}
