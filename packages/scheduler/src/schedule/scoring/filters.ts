import type { Candidate, PlacementRequest } from './candidate.js';
import type { PlacementPolicy } from './policy.js';

/**
 * Why a healthy node cannot take the request now, or undefined when it can. Reserved placements
 * count as if they were running, so a burst sees every start already granted.
 */
export function rejection(c: Candidate, req: PlacementRequest, policy: PlacementPolicy): string | undefined {
  const { node, reserved } = c;
  const { capacity: cap, load } = node;
  const n = req.count;
  if (load.runningCount + load.startsInFlight + reserved.count + n > cap.maxSandboxes)
    return `at its maximum of ${cap.maxSandboxes} sandboxes`;
  if (load.startsInFlight + reserved.count + n > cap.maxConcurrentStarts * policy.startsPerSlot)
    return `${load.startsInFlight + reserved.count} starts in flight`;
  const cpuLimit = cap.cpuCount * policy.cpuOvercommit;
  if (load.allocatedCpu + reserved.cpu + req.resources.cpuCount * n > cpuLimit)
    return `vCPUs allocated ${load.allocatedCpu + reserved.cpu} of ${cpuLimit}`;
  const memLimit = cap.memoryTotalMib * policy.memoryOvercommit;
  if (load.allocatedMemoryMib + reserved.memoryMib + req.resources.memoryMib * n > memLimit)
    return `memory allocated ${load.allocatedMemoryMib + reserved.memoryMib} of ${memLimit} MiB`;
  if (load.memoryFreeMib < policy.minFreeMemoryMib) return `only ${load.memoryFreeMib} MiB free`;
  return undefined;
}
