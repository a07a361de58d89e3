import { invalid, type DomainError } from '@agentenv/common';

/**
 * Why a sandbox cannot come back by a fresh start with its files (a filesystem-only pause, a
 * reboot), if it cannot: volumes are mounted at create only (the record does not keep their host
 * paths), and their files would be read into the layer as if they were the sandbox's own.
 */
export function coldStartRefusal(
  rec: { volumeMounts?: readonly unknown[] | undefined },
  what: string,
): DomainError | undefined {
  if (!rec.volumeMounts?.length) return undefined;
  return invalid(`a sandbox with volumes mounted cannot ${what}: that needs a cold start`);
}
