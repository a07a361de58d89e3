import { createHash } from 'node:crypto';
import { parseCaptureMeta } from './capture.js';
import type { CaptureMeta } from './capture-meta.js';
import type { ChunkingOptions, ChunkMode } from './chunker.js';
import { SnapshotCorruptError } from './errors.js';

/**
 * What a snapshot's capture is made of: each file of the capture directory as an ordered list of
 * content-addressed chunks, plus the capture's metadata (capture.json). A manifest is itself
 * stored as a blob (its sha256 is in the record), which keeps catalogue records small for
 * listing however large the sandbox's memory is.
 */
export const MANIFEST_FORMAT = 'aenv-manifest/1';

/** [sha256 hex, bytes]: tuples keep a manifest of 10^4–10^5 chunks compact. */
export type ChunkRef = readonly [hash: string, bytes: number];

export interface ManifestFile {
  readonly name: string;
  readonly bytes: number;
  /** How the file was cut (informational: rebuilding only concatenates). */
  readonly mode: ChunkMode;
  readonly chunks: readonly ChunkRef[];
}

export interface Manifest {
  readonly format: typeof MANIFEST_FORMAT;
  readonly capture: CaptureMeta;
  readonly chunking: ChunkingOptions;
  readonly files: readonly ManifestFile[];
}

const HASH_RE = /^[0-9a-f]{64}$/;

export function isSha256(s: unknown): s is string {
  return typeof s === 'string' && HASH_RE.test(s);
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

export function manifestBytes(m: Manifest): number {
  return m.files.reduce((n, f) => n + f.bytes, 0);
}

/** Every blob a manifest needs, once each. */
export function manifestChunkHashes(m: Manifest): Set<string> {
  const out = new Set<string>();
  for (const f of m.files) for (const [h] of f.chunks) out.add(h);
  return out;
}

export function encodeManifest(m: Manifest): Buffer {
  return Buffer.from(JSON.stringify(m));
}

/** Parses and checks a manifest blob; anything wrong is corruption (it was hashed when written). */
export function parseManifest(data: Buffer, what: string): Manifest {
  const bad = (m: string): never => {
    throw new SnapshotCorruptError(`manifest ${what}: ${m}`);
  };
  let v: unknown;
  try {
    v = JSON.parse(data.toString('utf8'));
  } catch {
    return bad('not JSON');
  }
  const m = v as Record<string, unknown>;
  if (typeof m !== 'object' || m === null || m.format !== MANIFEST_FORMAT) return bad('unknown format');
  let capture: CaptureMeta;
  try {
    capture = parseCaptureMeta(m.capture);
  } catch (e) {
    return bad((e as Error).message);
  }
  if (!Array.isArray(m.files)) return bad('no files');
  const seen = new Set<string>();
  for (const f of m.files as ManifestFile[]) {
    if (typeof f?.name !== 'string' || !/^[^/\0]+$/.test(f.name) || f.name === '.' || f.name === '..')
      bad('bad file name');
    if (seen.has(f.name)) bad(`file ${f.name} listed twice`);
    seen.add(f.name);
    if (!Number.isSafeInteger(f.bytes) || f.bytes < 0 || !Array.isArray(f.chunks)) bad(`bad file ${f.name}`);
    let sum = 0;
    for (const c of f.chunks) {
      if (!Array.isArray(c) || !isSha256(c[0]) || !Number.isSafeInteger(c[1]) || c[1] <= 0)
        bad(`bad chunk in ${f.name}`);
      sum += c[1];
    }
    if (sum !== f.bytes) bad(`chunks of ${f.name} add up to ${sum} bytes, not ${f.bytes}`);
  }
  for (const f of capture.files) {
    const listed = (m.files as ManifestFile[]).find((x) => x.name === f.name);
    if (!listed || listed.bytes !== f.bytes) bad(`capture file ${f.name} not stored with ${f.bytes} bytes`);
  }
  return v as Manifest;
}
