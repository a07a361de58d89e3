import { SnapshotInvalidError } from './errors.js';
import type { PageRequest, RecordFilter, RecordPage, SnapshotRecord } from './repository.js';

/**
 * Listing records a page at a time: a total order (newest first, ties by id) and opaque tokens
 * naming the last record of a page. Pure, shared by both backends.
 */

function encodeToken(r: SnapshotRecord): string {
  return Buffer.from(JSON.stringify([r.createdAt, r.id])).toString('base64url');
}

function decodeToken(t: string): [string, string] {
  try {
    const v = JSON.parse(Buffer.from(t, 'base64url').toString()) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') {
      return [v[0], v[1]];
    }
  } catch {
    // fall through
  }
  throw new SnapshotInvalidError('bad nextToken');
}

/** Newest first; ties broken by id so the order (and the tokens) are total. */
export function compareNewestFirst(a: SnapshotRecord, b: SnapshotRecord): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? 1 : -1;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/** One page of `records` (any order) matching the filter: pure, shared by both backends. */
export function pageRecords(all: SnapshotRecord[], filter: RecordFilter, page: PageRequest): RecordPage {
  const limit = page.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    throw new SnapshotInvalidError('limit must be 1–1000');
  const matches = (r: SnapshotRecord) =>
    (filter.parent === undefined || r.parent === filter.parent) &&
    Object.entries(filter.labels ?? {}).every(([k, v]) => r.labels[k] === v);
  let list = all.filter(matches).sort(compareNewestFirst);
  if (page.nextToken) {
    const [createdAt, id] = decodeToken(page.nextToken);
    const after = { createdAt, id } as SnapshotRecord;
    list = list.filter((r) => compareNewestFirst(after, r) < 0);
  }
  const records = list.slice(0, limit);
  const last = records[records.length - 1];
  return list.length > limit && last ? { records, nextToken: encodeToken(last) } : { records };
}
