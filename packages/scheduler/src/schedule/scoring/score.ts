import type { Candidate, PlacementRequest } from './candidate.js';
import type { PlacementPolicy } from './policy.js';

/**
 * Projected load after the placement, lower is better: the fullest of allocated CPU, memory and
 * sandbox slots (each counting reservations and this request), plus measured host usage.
 */
export function projectedLoad(c: Candidate, req: PlacementRequest, policy: PlacementPolicy): number {
  const { capacity: cap, load } = c.node;
  const n = req.count;
  const frac = (used: number, limit: number) => (limit > 0 ? used / limit : 1);
  const cpu = frac(
    load.allocatedCpu + c.reserved.cpu + req.resources.cpuCount * n,
    cap.cpuCount * policy.cpuOvercommit,
  );
  const mem = frac(
    load.allocatedMemoryMib + c.reserved.memoryMib + req.resources.memoryMib * n,
    cap.memoryTotalMib * policy.memoryOvercommit,
  );
  const slots = frac(load.runningCount + load.startsInFlight + c.reserved.count + n, cap.maxSandboxes);
  const measured = Math.max(frac(load.memoryUsedMib, cap.memoryTotalMib), frac(load.cpuLoad1m, cap.cpuCount));
  return Math.max(cpu, mem, slots) + policy.measuredWeight * Math.min(measured, 1);
}

/** Each node record's cache keys as a set, built once per record (records are replaced, never changed). */
const heldKeys = new WeakMap<readonly string[], ReadonlySet<string>>();

/** Whether the node already holds one of the captures the start restores. */
export function holdsCapture(c: Candidate, req: PlacementRequest): boolean {
  if (req.cacheKeys.length === 0) return false;
  const keys = c.node.cacheKeys;
  let held = heldKeys.get(keys);
  if (!held) heldKeys.set(keys, (held = new Set(keys)));
  return req.cacheKeys.some((k) => held.has(k));
}

export function score(c: Candidate, req: PlacementRequest, policy: PlacementPolicy): number {
  return projectedLoad(c, req, policy) - (holdsCapture(c, req) ? policy.localityBonus : 0);
}
