import { createReadStream } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import {
  AliasTakenError,
  SnapshotCorruptError,
  SnapshotError,
  SnapshotInvalidError,
  SnapshotNotFoundError,
} from './errors.js';
import { isSha256, sha256 } from './manifest.js';
import type {
  AliasEntry,
  BlobInfo,
  BlobSource,
  LockBody,
  ObjectStat,
  PageRequest,
  RecordFilter,
  RecordPage,
  Repository,
  SnapshotRecord,
} from './repository.js';
import {
  aliasKey,
  blobKey,
  checkAliasName,
  checkHash,
  checkLockName,
  checkSnapshotId,
  claimKey,
  decodeAliasName,
  isLockName,
  isSnapshotId,
  lockKey,
  parseRecord,
  recordKey,
  validateRecord,
} from './repository-keys.js';
import { pageRecords } from './repository-paging.js';
import { forEachLimit } from '@agentenv/common';

/** A blob given as a stream is buffered; larger blobs must come as a file. */
const MAX_STREAM_BLOB = 64 * 1024 * 1024;

interface AliasBody {
  id: string;
  nonce: string;
  createdAt: string;
}

export interface ObjectRepositoryOptions {
  /**
   * An alias whose record does not exist is a claim left by a crashed commit once it is older
   * than this (a live commit writes its record milliseconds after claiming); default 60 s.
   */
  readonly staleAliasMs?: number;
}

async function hashFile(path: string): Promise<{ hash: string; bytes: number }> {
  const h = createHash('sha256');
  let bytes = 0;
  for await (const c of createReadStream(path)) {
    h.update(c as Buffer);
    bytes += (c as Buffer).length;
  }
  return { hash: h.digest('hex'), bytes };
}

export async function collect(stream: Readable, max = Infinity): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const c of stream) {
    const b = typeof c === 'string' ? Buffer.from(c) : (c as Buffer);
    n += b.length;
    if (n > max) {
      stream.destroy();
      throw new SnapshotInvalidError(`stream larger than ${max} bytes: pass a file instead`);
    }
    parts.push(b);
  }
  return Buffer.concat(parts);
}

/**
 * The catalogue logic both backends share, over a handful of object primitives each backend
 * implements with its own atomicity guarantees (see posix-repository.ts and s3-repository.ts).
 */
export abstract class ObjectRepository implements Repository {
  abstract readonly backend: 'posix_fs' | 'oss';
  abstract readonly location: string;
  private readonly staleAliasMs: number;
  /** Records never change once written: cache them (bounded) so listing reads only new ones. */
  private readonly recordCache = new Map<string, SnapshotRecord>();

  constructor(opts: ObjectRepositoryOptions = {}) {
    this.staleAliasMs = opts.staleAliasMs ?? 60_000;
  }

  abstract open(): Promise<void>;
  abstract close(): Promise<void>;

  /**
   * Writes an object in one atomic step (readers see the old or the new content, never a part).
   * `exclusive`: only if the key does not exist; returns false (writing nothing) when it does.
   */
  protected abstract putObject(
    key: string,
    body: Buffer | { readonly path: string },
    opts: { exclusive: boolean },
  ): Promise<boolean>;
  protected abstract getObject(key: string): Promise<{ data: Buffer; mtimeMs: number } | null>;
  protected abstract openObject(key: string): Promise<Readable | null>;
  protected abstract statObject(key: string): Promise<ObjectStat | null>;
  /** Every object whose key starts with `prefix` (a folder, ending in `/`), in any order. */
  protected abstract listObjects(prefix: string): AsyncIterable<ObjectStat>;
  /** Missing is fine. */
  protected abstract deleteObject(key: string): Promise<void>;
  /** Makes every blob written so far durable before a record refers to them. */
  protected async flush(): Promise<void> {}

  // ------------------------------------------------ blobs

  async hasBlob(hash: string): Promise<boolean> {
    return (await this.statObject(blobKey(checkHash(hash)))) !== null;
  }

  async putBlob(hash: string, source: BlobSource): Promise<{ bytes: number }> {
    checkHash(hash);
    let body: Buffer | { path: string };
    let actual: string;
    let bytes: number;
    if (Buffer.isBuffer(source)) {
      body = source;
      actual = sha256(source);
      bytes = source.length;
    } else if ('path' in source && typeof source.path === 'string' && !('pipe' in source)) {
      body = { path: source.path };
      ({ hash: actual, bytes } = await hashFile(source.path));
    } else {
      body = await collect(source as Readable, MAX_STREAM_BLOB);
      actual = sha256(body);
      bytes = body.length;
    }
    if (actual !== hash) throw new SnapshotInvalidError(`blob content has sha256 ${actual}, not ${hash}`);
    await this.putObject(blobKey(hash), body, { exclusive: false });
    return { bytes };
  }

  async getBlob(hash: string): Promise<Readable> {
    const s = await this.openObject(blobKey(checkHash(hash)));
    if (!s) throw new SnapshotCorruptError(`blob ${hash} is missing from ${this.location}`);
    return s;
  }

  async readBlob(hash: string): Promise<Buffer> {
    const data = await collect(await this.getBlob(hash));
    const actual = sha256(data);
    if (actual !== hash) {
      throw new SnapshotCorruptError(
        `blob ${hash} in ${this.location} is corrupted (its content hashes to ${actual})`,
      );
    }
    return data;
  }

  async deleteBlob(hash: string): Promise<void> {
    await this.deleteObject(blobKey(checkHash(hash)));
  }

  async *listBlobs(): AsyncIterable<BlobInfo> {
    for await (const o of this.listObjects('blobs/sha256/')) {
      const hash = o.key.slice(o.key.lastIndexOf('/') + 1);
      if (isSha256(hash) && o.key === blobKey(hash)) yield { hash, bytes: o.bytes, mtimeMs: o.mtimeMs };
    }
  }

  // ------------------------------------------------ records

  async getRecord(id: string): Promise<SnapshotRecord | null> {
    if (!isSnapshotId(id)) return null;
    const cached = this.recordCache.get(id);
    if (cached) {
      // Cheap existence check: a deleted record must not come back from the cache.
      if (await this.statObject(recordKey(id))) return cached;
      this.recordCache.delete(id);
      return null;
    }
    return this.loadRecord(id);
  }

  private async loadRecord(id: string): Promise<SnapshotRecord | null> {
    const o = await this.getObject(recordKey(id));
    if (!o) return null;
    const r = parseRecord(o.data, id);
    if (r.id !== id) throw new SnapshotCorruptError(`record ${id} holds id ${r.id}`);
    if (this.recordCache.size >= 10_000) {
      const oldest = this.recordCache.keys().next().value;
      if (oldest !== undefined) this.recordCache.delete(oldest);
    }
    this.recordCache.set(id, r);
    return r;
  }

  private async allRecords(): Promise<SnapshotRecord[]> {
    const ids: string[] = [];
    for await (const o of this.listObjects('records/')) {
      const m = /^records\/([^/]+)\.json$/.exec(o.key);
      if (m?.[1] && isSnapshotId(m[1])) ids.push(m[1]);
    }
    const live = new Set(ids);
    for (const id of this.recordCache.keys()) if (!live.has(id)) this.recordCache.delete(id);
    const out: SnapshotRecord[] = [];
    const missing = ids.filter((id) => {
      const r = this.recordCache.get(id);
      if (r) out.push(r);
      return !r;
    });
    await forEachLimit(missing, 16, async (id) => {
      const r = await this.loadRecord(id).catch((e: unknown) => {
        if (e instanceof SnapshotCorruptError) return null; // listed, but unreadable: skip it
        throw e;
      });
      if (r) out.push(r);
    });
    return out;
  }

  async listRecords(filter: RecordFilter = {}, page: PageRequest = {}): Promise<RecordPage> {
    if (filter.alias !== undefined) {
      const id = await this.resolveAlias(filter.alias);
      const r = id ? await this.getRecord(id) : null;
      return pageRecords(r ? [r] : [], filter, page);
    }
    return pageRecords(await this.allRecords(), filter, page);
  }

  async commit(record: SnapshotRecord, aliases: readonly string[] = []): Promise<void> {
    validateRecord(record, `record ${record.id}`);
    const names = [...new Set(aliases.map(checkAliasName))];
    const claimed: string[] = [];
    await this.flush();
    try {
      for (const name of names) {
        await this.claimAlias(name, record.id);
        claimed.push(name);
      }
      // The commit point: one atomic, exclusive write of the record.
      const body = Buffer.from(JSON.stringify(record));
      if (!(await this.putObject(recordKey(record.id), body, { exclusive: true }))) {
        // The same record is there: an earlier attempt of this commit got through after all.
        const existing = await this.getObject(recordKey(record.id));
        if (!existing?.data.equals(body))
          throw new SnapshotError('exists', `snapshot ${record.id} already exists`);
      }
    } catch (e) {
      for (const name of claimed) await this.releaseAlias(name, record.id).catch(() => undefined);
      throw e;
    }
  }

  async deleteRecord(id: string): Promise<boolean> {
    if (!isSnapshotId(id) || !(await this.statObject(recordKey(id)))) return false;
    // Names first: a crash in between leaves a record without names, never a name without record
    // that a reader could trust.
    for (const a of await this.readAliases()) if (a.id === id) await this.deleteObject(aliasKey(a.name));
    await this.deleteObject(recordKey(id));
    this.recordCache.delete(id);
    return true;
  }

  // ------------------------------------------------ aliases

  private async readAlias(name: string): Promise<(AliasBody & { mtimeMs: number }) | null> {
    const o = await this.getObject(aliasKey(name));
    if (!o) return null;
    try {
      const body = JSON.parse(o.data.toString()) as AliasBody;
      if (typeof body.id !== 'string') return null;
      return { ...body, mtimeMs: o.mtimeMs };
    } catch {
      return null;
    }
  }

  private aliasBody(id: string): Buffer {
    const body: AliasBody = {
      id,
      nonce: randomBytes(8).toString('hex'),
      createdAt: new Date().toISOString(),
    };
    return Buffer.from(JSON.stringify(body));
  }

  private async recordExists(id: string): Promise<boolean> {
    return isSnapshotId(id) && (await this.statObject(recordKey(id))) !== null;
  }

  /**
   * Takes a name for `id` with an exclusive create. A name held by an existing snapshot is taken;
   * a name whose snapshot does not exist is a claim of a commit in progress (fresh) or of one
   * that crashed (older than staleAliasMs), which is replaced. Two processes replacing the same
   * stale claim at the same instant may both believe they hold it (the later write wins): that
   * needs a crash and then a race on the same name.
   */
  private async claimAlias(name: string, id: string): Promise<void> {
    const key = aliasKey(name);
    for (let attempt = 0; attempt < 5; attempt++) {
      if (await this.putObject(key, this.aliasBody(id), { exclusive: true })) return;
      const cur = await this.readAlias(name);
      if (!cur) continue; // deleted meanwhile (or unreadable): try again
      if (cur.id === id) return;
      if (await this.recordExists(cur.id)) throw new AliasTakenError(name, cur.id);
      if (Date.now() - cur.mtimeMs < this.staleAliasMs) throw new AliasTakenError(name, cur.id);
      await this.deleteObject(key);
    }
    throw new SnapshotError('busy', `could not take the name ${JSON.stringify(name)}: it keeps changing`);
  }

  private async releaseAlias(name: string, id: string): Promise<void> {
    const cur = await this.readAlias(name);
    if (cur?.id === id) await this.deleteObject(aliasKey(name));
  }

  async resolveAlias(name: string): Promise<string | null> {
    const cur = await this.readAlias(checkAliasName(name));
    return cur && (await this.recordExists(cur.id)) ? cur.id : null;
  }

  async setAlias(name: string, id: string): Promise<void> {
    checkAliasName(name);
    if (!(await this.recordExists(checkSnapshotId(id)))) throw new SnapshotNotFoundError(id);
    await this.putObject(aliasKey(name), this.aliasBody(id), { exclusive: false });
  }

  async deleteAlias(name: string): Promise<boolean> {
    const cur = await this.readAlias(checkAliasName(name));
    if (!cur) return false;
    await this.deleteObject(aliasKey(name));
    return true;
  }

  private async readAliases(): Promise<AliasEntry[]> {
    const names: string[] = [];
    for await (const o of this.listObjects('aliases/')) {
      const name = decodeAliasName(o.key.slice('aliases/'.length));
      if (name !== null) names.push(name);
    }
    const out: AliasEntry[] = [];
    await forEachLimit(names, 16, async (name) => {
      const a = await this.readAlias(name);
      if (a) out.push({ name, id: a.id });
    });
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async listAliases(id?: string): Promise<AliasEntry[]> {
    const all = (await this.readAliases()).filter((a) => id === undefined || a.id === id);
    const exists = new Map<string, boolean>();
    for (const a of all) if (!exists.has(a.id)) exists.set(a.id, await this.recordExists(a.id));
    return all.filter((a) => exists.get(a.id));
  }

  // ------------------------------------------------ locks

  async putLock(name: string, body: LockBody): Promise<void> {
    await this.putObject(lockKey(checkLockName(name)), Buffer.from(JSON.stringify(body)), {
      exclusive: false,
    });
  }

  async listLocks(): Promise<{ name: string; body: LockBody }[]> {
    const out: { name: string; body: LockBody }[] = [];
    for await (const o of this.listObjects('locks/')) {
      const m = /^locks\/([^/]+)\.json$/.exec(o.key);
      if (!m?.[1] || !isLockName(m[1])) continue;
      const got = await this.getObject(o.key);
      if (!got) continue;
      try {
        out.push({ name: m[1], body: JSON.parse(got.data.toString()) as LockBody });
      } catch {
        // being written by a backend without atomic puts, or garbage: not a lock
      }
    }
    return out;
  }

  async deleteLock(name: string): Promise<void> {
    await this.deleteObject(lockKey(checkLockName(name)));
  }

  // ------------------------------------------------ claims

  async claim(name: string, owner: string): Promise<string> {
    const key = claimKey(name);
    for (let attempt = 0; attempt < 5; attempt++) {
      if (await this.putObject(key, Buffer.from(owner), { exclusive: true })) return owner;
      const cur = await this.getObject(key);
      if (cur) return cur.data.toString();
      // released meanwhile: try again
    }
    throw new SnapshotError('busy', `could not take the claim ${JSON.stringify(name)}: it keeps changing`);
  }

  async deleteClaim(name: string): Promise<void> {
    await this.deleteObject(claimKey(name));
  }
}
