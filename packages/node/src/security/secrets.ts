import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Reads a secret file, or creates it (0600) with `make()` when missing; `created` says which. */
export function readOrCreateSecret(file: string, make: () => string): { value: string; created: boolean } {
  try {
    return { value: readFileSync(file, 'utf8').trim(), created: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const value = make();
  writeFileSync(file, value + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  return { value, created: true };
}

/** Reads a secret file, or creates it (0600) with `make()` when missing. */
export const loadOrCreateSecret = (file: string, make: () => string): string =>
  readOrCreateSecret(file, make).value;

export const newApiKey = () => 'e2b_' + randomBytes(20).toString('hex');

/** The node's own secret, from which sandbox tokens are derived. */
export const newNodeSecret = () => randomBytes(32).toString('hex');
