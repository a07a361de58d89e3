/** Knobs of placement; `config.ts` reads them from the environment. */
export interface PlacementPolicy {
  /** Allocated vCPUs allowed per host CPU (idle agent sandboxes use little of theirs). */
  cpuOvercommit: number;
  /** Allocated memory allowed per MiB of host memory (gVisor commits memory lazily). */
  memoryOvercommit: number;
  /** A node whose measured free memory is below this takes no new sandbox. */
  minFreeMemoryMib: number;
  /** Starts a node may have in flight (running + reserved), per its max_concurrent_starts. */
  startsPerSlot: number;
  /** Candidates sampled for best-of-K; the least loaded of them wins. */
  bestOfK: number;
  /**
   * Subtracted from the score of a node holding a requested capture. At 1 a node with the
   * capture wins over any node without it while it passes the filters (scores are fractions of
   * capacity); smaller values let load outweigh locality.
   */
  localityBonus: number;
  /** Weight of measured host usage (memory used, load average) beside allocation. */
  measuredWeight: number;
}

export const DEFAULT_POLICY: PlacementPolicy = Object.freeze({
  cpuOvercommit: 16,
  memoryOvercommit: 2,
  minFreeMemoryMib: 256,
  startsPerSlot: 1,
  bestOfK: 3,
  localityBonus: 1,
  measuredWeight: 0.5,
});
