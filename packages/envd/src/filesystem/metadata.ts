import { stat } from 'node:fs/promises';
import * as napiXattr from '@napi-rs/xattr';
import { EnvdError, invalidArgument } from '../errors.js';

/**
 * User-defined file metadata, stored the way E2B's envd stores it: one extended attribute per key,
 * `user.e2b.<key>`, so values set inside the sandbox (`setfattr -n user.e2b.k`) show up too and
 * metadata follows the file through renames and copies that keep xattrs.
 *
 * Fallback: where the filesystem refuses user xattrs (EOPNOTSUPP: tmpfs before Linux 6.6, some
 * FUSE and virtual filesystems), metadata is kept in a bounded in-memory sidecar keyed by the
 * file's device and inode (checked against its birth time where the filesystem reports one). That
 * store follows renames but is lost when envd restarts and forgets the oldest entries past
 * SIDECAR_LIMIT. See README.md, "File metadata".
 */

export const METADATA_XATTR_PREFIX = 'user.e2b.';
/** Linux limits a whole xattr name to 255 bytes. */
export const MAX_METADATA_KEY_LENGTH = 255 - METADATA_XATTR_PREFIX.length;
/** ext4 keeps an inode's xattrs in one 4 KiB block; larger sets would fail late with ENOSPC. */
export const MAX_METADATA_TOTAL_LENGTH = 4096;
const SIDECAR_LIMIT = 100_000;

export type Metadata = Record<string, string>;

/** The subset of @napi-rs/xattr this module uses; tests substitute their own. */
export interface XattrApi {
  listAttributes(path: string): Promise<string[]>;
  getAttribute(path: string, name: string): Promise<Buffer | null>;
  setAttribute(path: string, name: string, value: Buffer | string): Promise<void>;
  removeAttribute(path: string, name: string): Promise<void>;
}

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/** Why a metadata set cannot be stored (same rules and limits as E2B's envd), or undefined. */
export function metadataProblem(metadata: Metadata): string | undefined {
  let total = 0;
  for (const [key, value] of Object.entries(metadata)) {
    if (key === '') return 'metadata key must not be empty';
    if (key.length > MAX_METADATA_KEY_LENGTH) {
      return `metadata key ${JSON.stringify(key)} exceeds ${MAX_METADATA_KEY_LENGTH} bytes`;
    }
    if (!PRINTABLE_ASCII.test(key)) return `metadata key ${JSON.stringify(key)} is not printable ASCII`;
    if (!PRINTABLE_ASCII.test(value)) {
      return `metadata value for key ${JSON.stringify(key)} is not printable ASCII`;
    }
    total += METADATA_XATTR_PREFIX.length + key.length + value.length;
  }
  if (total > MAX_METADATA_TOTAL_LENGTH) {
    return `total metadata size ${total} exceeds ${MAX_METADATA_TOTAL_LENGTH} bytes`;
  }
  return undefined;
}

/**
 * `X-Metadata-<key>: value` request headers as metadata: keys lowercased (HTTP header names are
 * case-insensitive, and E2B lowercases them too), the first value of a repeated header wins.
 * Throws invalid_argument when the set cannot be stored.
 */
export function metadataFromHeaders(headers: Record<string, string[] | undefined>): Metadata {
  const metadata: Metadata = {};
  for (const [name, values] of Object.entries(headers)) {
    if (!name.toLowerCase().startsWith('x-metadata-') || !values?.length) continue;
    const key = name.slice('x-metadata-'.length).toLowerCase();
    if (key !== '' && !(key in metadata)) metadata[key] = values[0]!;
  }
  const problem = metadataProblem(metadata);
  if (problem) throw invalidArgument(`invalid metadata: ${problem}`);
  return metadata;
}

/** The errno of a @napi-rs/xattr failure: it only reports "... (os error N)" in the message. */
export function xattrErrno(err: unknown): number | undefined {
  const m = /\(os error (\d+)\)/.exec(err instanceof Error ? err.message : String(err));
  return m ? Number(m[1]) : undefined;
}

const EOPNOTSUPP = 95; // ENOTSUP is the same number on Linux
const ENODATA = 61;
const NO_SPACE = new Set([28 /* ENOSPC */, 122 /* EDQUOT */, 7 /* E2BIG */]);

interface SidecarEntry {
  birthtimeNs: bigint;
  metadata: Metadata;
}

export class MetadataStore {
  private readonly sidecar = new Map<string, SidecarEntry>();

  constructor(private readonly xattr: XattrApi = napiXattr) {}

  /** The file's metadata (following symlinks); empty when it has none or it cannot be read. */
  async read(path: string): Promise<Metadata> {
    let names: string[];
    try {
      names = await this.xattr.listAttributes(path);
    } catch (err) {
      if (xattrErrno(err) === EOPNOTSUPP) return this.readSidecar(path);
      return {};
    }
    const metadata: Metadata = {};
    for (const name of names) {
      if (!name.startsWith(METADATA_XATTR_PREFIX)) continue;
      let value: Buffer | null;
      try {
        value = await this.xattr.getAttribute(path, name);
      } catch {
        continue;
      }
      if (value === null) continue;
      // Set from inside the sandbox, a value may be any bytes; the proto map needs UTF-8.
      const text = decodeUtf8(value);
      if (text !== undefined) metadata[name.slice(METADATA_XATTR_PREFIX.length)] = text;
    }
    return metadata;
  }

  /**
   * Replaces the file's whole metadata set with `metadata` (an empty set clears it), so that
   * overwriting a file does not keep stale keys from an earlier upload.
   */
  async write(path: string, metadata: Metadata): Promise<void> {
    const problem = metadataProblem(metadata);
    if (problem) throw invalidArgument(`invalid metadata: ${problem}`);
    try {
      const existing = await this.xattr.listAttributes(path);
      for (const name of existing) {
        if (!name.startsWith(METADATA_XATTR_PREFIX)) continue;
        if (name.slice(METADATA_XATTR_PREFIX.length) in metadata) continue;
        await this.xattr.removeAttribute(path, name).catch((err: unknown) => {
          if (xattrErrno(err) !== ENODATA) throw err;
        });
      }
      for (const [key, value] of Object.entries(metadata)) {
        await this.xattr.setAttribute(path, METADATA_XATTR_PREFIX + key, value);
      }
    } catch (err) {
      const errno = xattrErrno(err);
      if (errno === EOPNOTSUPP) return this.writeSidecar(path, metadata);
      if (errno !== undefined && NO_SPACE.has(errno)) {
        throw new EnvdError('insufficient_storage', `not enough space for file metadata of ${path}`);
      }
      throw new EnvdError('internal', `error writing file metadata of ${path}: ${(err as Error).message}`);
    }
  }

  private async identity(path: string): Promise<{ key: string; birthtimeNs: bigint } | undefined> {
    try {
      const st = await stat(path, { bigint: true });
      return { key: `${st.dev}:${st.ino}`, birthtimeNs: st.birthtimeNs };
    } catch {
      return undefined;
    }
  }

  private async readSidecar(path: string): Promise<Metadata> {
    const id = await this.identity(path);
    const entry = id && this.sidecar.get(id.key);
    if (!id || !entry) return {};
    // A reused inode number with a different birth time is another file.
    if (entry.birthtimeNs !== id.birthtimeNs) {
      this.sidecar.delete(id.key);
      return {};
    }
    return { ...entry.metadata };
  }

  private async writeSidecar(path: string, metadata: Metadata): Promise<void> {
    const id = await this.identity(path);
    if (!id) return;
    this.sidecar.delete(id.key);
    if (Object.keys(metadata).length === 0) return;
    this.sidecar.set(id.key, { birthtimeNs: id.birthtimeNs, metadata: { ...metadata } });
    if (this.sidecar.size > SIDECAR_LIMIT) this.sidecar.delete(this.sidecar.keys().next().value!);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
function decodeUtf8(b: Buffer): string | undefined {
  try {
    return utf8.decode(b);
  } catch {
    return undefined;
  }
}

/** The daemon's store. */
export const metadataStore = new MetadataStore();
