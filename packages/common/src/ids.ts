import { randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/**
 * Sandbox ids: 20 characters of [a-z0-9] like E2B's, so `{port}-{id}.{domain}` host labels work
 * and `{port}-{id}` splits at the first dash. Rejection sampling keeps every character uniform.
 */
export function newSandboxId(length = 20): string {
  let id = '';
  while (id.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 252 && id.length < length) id += ALPHABET[b % 36];
    }
  }
  return id;
}

export function isSandboxId(s: string): boolean {
  return /^[a-z0-9]{1,64}$/.test(s);
}
