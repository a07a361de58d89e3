import { SnapshotCorruptError, SnapshotInvalidError, type SnapshotError } from './errors.js';
import { isSha256 } from './manifest.js';
import { RECORD_FORMAT, type SnapshotRecord } from './repository.js';

/**
 * What the repository's objects are called and what may be in them: snapshot ids, alias and lock
 * names, the object key of each kind, and the shape of a record. Pure; both backends and the
 * store check their input with these.
 */

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;
const LABEL_KEY_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const LOCK_NAME_RE = /^[a-z]+-[0-9a-f]{8,64}$/;

export function isSnapshotId(s: string): boolean {
  return ID_RE.test(s);
}

export function checkSnapshotId(id: string): string {
  if (typeof id !== 'string' || !ID_RE.test(id))
    throw new SnapshotInvalidError(`bad snapshot id ${JSON.stringify(id)}`);
  return id;
}

/** Names are 1–256 printable characters; `/`, spaces and unicode are fine (they are encoded). */
export function checkAliasName(name: string): string {
  const control = (c: string) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f;
  if (typeof name !== 'string' || name.length < 1 || name.length > 256 || [...name].some(control)) {
    throw new SnapshotInvalidError(`bad snapshot name ${JSON.stringify(name)}`);
  }
  return name;
}

/** encodeURIComponent keeps `.`, so `.` and `..` (and a leading dot) get one more escape. */
export function encodeAliasName(name: string): string {
  return encodeURIComponent(checkAliasName(name)).replace(/^\./, '%2E');
}

export function decodeAliasName(encoded: string): string | null {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return null;
  }
}

export const blobKey = (hash: string) => `blobs/sha256/${hash.slice(0, 2)}/${hash}`;
export const recordKey = (id: string) => `records/${id}.json`;
export const aliasKey = (name: string) => `aliases/${encodeAliasName(name)}`;
export const lockKey = (name: string) => `locks/${name}.json`;
export const claimKey = (name: string) => `claims/${encodeAliasName(name)}`;

export function checkLockName(name: string): string {
  if (!LOCK_NAME_RE.test(name)) throw new SnapshotInvalidError(`bad lock name ${name}`);
  return name;
}

export function isLockName(name: string): boolean {
  return LOCK_NAME_RE.test(name);
}

export function checkHash(hash: string): string {
  if (!isSha256(hash)) throw new SnapshotInvalidError(`bad blob hash ${JSON.stringify(hash)}`);
  return hash;
}

export function parseRecord(data: Buffer | string, what: string): SnapshotRecord {
  let v: unknown;
  try {
    v = JSON.parse(data.toString());
  } catch {
    throw new SnapshotCorruptError(`record ${what} is not JSON`);
  }
  return validateRecord(v, `record ${what}`, SnapshotCorruptError);
}

/** Checks a record's shape; `E` is the error for a bad one (corrupt when read, invalid when given). */
export function validateRecord(
  v: unknown,
  what: string,
  E: new (m: string) => SnapshotError = SnapshotInvalidError,
): SnapshotRecord {
  const r = v as Record<string, unknown>;
  const bad = (m: string): never => {
    throw new E(`${what}: ${m}`);
  };
  if (typeof r !== 'object' || r === null || r.format !== RECORD_FORMAT) return bad('unknown format');
  if (typeof r.id !== 'string' || !ID_RE.test(r.id)) bad('bad id');
  if (typeof r.createdAt !== 'string' || Number.isNaN(Date.parse(r.createdAt))) bad('bad createdAt');
  if (r.parent !== undefined && (typeof r.parent !== 'string' || !ID_RE.test(r.parent))) bad('bad parent');
  const labels = r.labels as Record<string, unknown>;
  if (typeof labels !== 'object' || labels === null || Array.isArray(labels)) bad('bad labels');
  for (const [k, val] of Object.entries(labels)) {
    if (!LABEL_KEY_RE.test(k) || typeof val !== 'string') bad(`bad label ${k}`);
  }
  if (typeof r.meta !== 'object' || r.meta === null || Array.isArray(r.meta)) bad('bad meta');
  if (!isSha256(r.manifest)) bad('bad manifest hash');
  if (!Number.isSafeInteger(r.bytesTotal) || (r.bytesTotal as number) < 0) bad('bad bytesTotal');
  return r as unknown as SnapshotRecord;
}
