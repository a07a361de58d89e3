import { randomBytes } from 'node:crypto';

/**
 * runsc resolves container ids by prefix, so `s1` would match `s10`. Every id has the same
 * length, which makes a prefix match an exact match.
 */
export const SANDBOX_ID_PREFIX = 'aenv-';
const RANDOM_HEX = 20;
export const SANDBOX_ID_LENGTH = SANDBOX_ID_PREFIX.length + RANDOM_HEX;
const ID_RE = new RegExp(`^${SANDBOX_ID_PREFIX}[0-9a-f]{${RANDOM_HEX}}$`);

export function newSandboxId(random: (n: number) => Buffer = randomBytes): string {
  return SANDBOX_ID_PREFIX + random(RANDOM_HEX / 2).toString('hex');
}

export function isSandboxId(id: string): boolean {
  return ID_RE.test(id);
}
