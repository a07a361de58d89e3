import { NetworkError } from './errors.js';
import { cidrSize, formatIPv4, type Cidr } from './ipv4.js';

/**
 * Host-side addressing: slot N owns the N-th /31 of the node's host range. A /31 (RFC 3021) is a
 * point-to-point link with no network or broadcast address, so a /16 serves 32768 slots.
 */
export const SLOT_LINK_PREFIX = 31;

export interface SlotAddresses {
  /** Root-namespace end of the link; the router namespace's default gateway. */
  readonly rootSide: string;
  /** Router-namespace end of the link: the address the node dials (DNAT to the sandbox). */
  readonly hostAddress: string;
}

export function slotCapacity(hostRange: Cidr, indexLimit: number): number {
  return Math.min(cidrSize(hostRange) / 2, indexLimit);
}

export function slotAddresses(hostRange: Cidr, index: number): SlotAddresses {
  if (!Number.isInteger(index) || index < 0 || index >= cidrSize(hostRange) / 2) {
    throw new NetworkError('EXHAUSTED', `slot index ${index} is outside the host range`);
  }
  const base = hostRange.network + index * 2;
  return { rootSide: formatIPv4(base), hostAddress: formatIPv4(base + 1) };
}

/**
 * Hands out the lowest free slot index, so indexes (and therefore interface names and addresses)
 * stay small and are reused as soon as a slot is torn down.
 */
export class IndexAllocator {
  readonly #used = new Set<number>();
  #lowestMaybeFree = 0;

  constructor(readonly capacity: number) {}

  get inUse(): number {
    return this.#used.size;
  }

  allocate(): number {
    for (let index = this.#lowestMaybeFree; index < this.capacity; index++) {
      if (!this.#used.has(index)) {
        this.#used.add(index);
        this.#lowestMaybeFree = index + 1;
        return index;
      }
    }
    throw new NetworkError(
      'EXHAUSTED',
      `all ${this.capacity} network slots are in use; widen hostRange or release sandboxes`,
    );
  }

  release(index: number): void {
    if (this.#used.delete(index)) this.#lowestMaybeFree = Math.min(this.#lowestMaybeFree, index);
  }
}
