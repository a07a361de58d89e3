import { NetworkError, type EgressRules, type NetSlot } from '@agentenv/node';
import type { SlotProvider } from '@agentenv/node/server';
import { Faults } from './faults.js';

export type SlotStep = 'acquire' | 'setEgress' | 'release';

/**
 * Network slots as numbers: `capacity` of them (then acquire fails as the network manager does,
 * EXHAUSTED), each with its egress rules kept for tests to look at. The host address every slot
 * gets is `hostAddress` (127.0.0.1 lets a test put a real server behind a fake sandbox).
 */
export class FakeSlots implements SlotProvider {
  readonly faults = new Faults<SlotStep>((s) => new NetworkError('COMMAND_FAILED', `fake: ${s} failed`));
  private readonly inUse = new Map<number, EgressRules>();

  constructor(private readonly opts: { capacity?: number; hostAddress?: (index: number) => string } = {}) {}

  async acquire(egress: EgressRules): Promise<NetSlot> {
    await this.faults.check('acquire');
    if (this.inUse.size >= (this.opts.capacity ?? 64))
      throw new NetworkError('EXHAUSTED', 'fake: every host-side address is in use');
    let index = 0;
    while (this.inUse.has(index)) index++;
    this.inUse.set(index, egress);
    return {
      index,
      netnsPath: `/run/netns/fake-${index}`,
      hostAddress: this.opts.hostAddress?.(index) ?? `10.201.0.${2 * index + 1}`,
      sandboxAddress: '10.0.2.2',
      reset: async () => undefined,
    };
  }

  async setEgress(slot: NetSlot, egress: EgressRules): Promise<void> {
    await this.faults.check('setEgress');
    if (!this.inUse.has(slot.index))
      throw new NetworkError('UNKNOWN_SLOT', `fake: slot ${slot.index} is not in use`);
    this.inUse.set(slot.index, egress);
  }

  async release(slot: NetSlot): Promise<void> {
    await this.faults.check('release');
    this.inUse.delete(slot.index);
  }

  /** Slots acquired and not released. */
  get used(): number {
    return this.inUse.size;
  }

  egressOf(slot: NetSlot): EgressRules | undefined {
    return this.inUse.get(slot.index);
  }
}
