import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

/** The format tag of a sealed text: AES-256-GCM, then base64url of iv, tag and ciphertext. */
const FORMAT = 'aes-256-gcm';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A 256-bit key for one purpose, derived from a secret, so one secret can key several uses. */
export function sealingKey(secret: string, purpose: string): Buffer {
  return createHmac('sha256', secret).update(`aenv-seal:${purpose}`).digest();
}

/**
 * Encrypts and authenticates `text`; `context` (e.g. the id of what it belongs to) is
 * authenticated too, so a sealed text cannot be moved to something else.
 */
export function seal(key: Buffer, text: string, context: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(context));
  const data = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  const parts = [iv, cipher.getAuthTag(), data].map((b) => b.toString('base64url'));
  return [FORMAT, ...parts].join('.');
}

/** The text `seal` sealed with the same key and context; undefined when it cannot be opened. */
export function unseal(key: Buffer, sealed: string, context: string): string | undefined {
  const [format, iv, tag, data, ...rest] = sealed.split('.');
  if (format !== FORMAT || !iv || !tag || data === undefined || rest.length > 0) return undefined;
  const ivBytes = Buffer.from(iv, 'base64url');
  const tagBytes = Buffer.from(tag, 'base64url');
  if (ivBytes.length !== IV_BYTES || tagBytes.length !== TAG_BYTES) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, ivBytes).setAAD(Buffer.from(context));
    decipher.setAuthTag(tagBytes);
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString(
      'utf8',
    );
  } catch {
    return undefined;
  }
}
