import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Reads a secret file, or creates it (0600) with `make()` when missing. */
export function loadOrCreateSecret(file: string, make: () => string): string {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const value = make();
  writeFileSync(file, value + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  return value;
}

export const newApiKey = () => 'e2b_' + randomBytes(20).toString('hex');

/** A sandbox's envd token: derived, so the node can recompute it after a restart. */
export function envdAccessToken(nodeSecret: string, sandboxId: string): string {
  return createHmac('sha256', nodeSecret).update(`envd:${sandboxId}`).digest('hex');
}

export function trafficAccessToken(nodeSecret: string, sandboxId: string): string {
  return createHmac('sha256', nodeSecret).update(`traffic:${sandboxId}`).digest('hex').slice(0, 32);
}

/** Constant-time equality for secrets given by clients. */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
