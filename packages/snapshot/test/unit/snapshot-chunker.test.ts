import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  Chunker,
  chunkModeFor,
  DEFAULT_CHUNKING,
  validateChunking,
  type ChunkMode,
  type ChunkingOptions,
} from '../../src/chunker.js';
import { SnapshotInvalidError } from '../../src/errors.js';

const O: ChunkingOptions = DEFAULT_CHUNKING;
const PAGE = O.pageBytes;

/** Feeds `data` in pieces of the given sizes (cycled) and returns the chunks. */
function chunk(data: Buffer, mode: ChunkMode, pieces: number[] = [1 << 20], o = O): Buffer[] {
  const c = new Chunker(o, mode);
  const out: Buffer[] = [];
  let off = 0;
  for (let i = 0; off < data.length; i++) {
    const n = pieces[i % pieces.length]!;
    out.push(...c.push(data.subarray(off, off + n)));
    off += n;
  }
  out.push(...c.end());
  return out;
}

const hashes = (chunks: Buffer[]) => chunks.map((c) => createHash('sha256').update(c).digest('hex'));

/** Bytes of `b`'s chunks that `a` does not have. */
function newBytes(a: Buffer[], b: Buffer[]): number {
  const have = new Set(hashes(a));
  return b.reduce((n, c, i) => (have.has(hashes([c])[0]!) ? n : n + b[i]!.length), 0);
}

describe('snapshot chunker', () => {
  for (const mode of ['page', 'gear'] as const) {
    it(`${mode}: chunks concatenate to the input, within bounds, whatever the read sizes`, () => {
      const data = randomBytes(3 * 1024 * 1024 + (mode === 'page' ? 0 : 123));
      const a = chunk(data, mode);
      expect(Buffer.concat(a).equals(data)).toBe(true);
      for (const c of a.slice(0, -1)) {
        expect(c.length).toBeGreaterThanOrEqual(O.minBytes);
        expect(c.length).toBeLessThanOrEqual(O.maxBytes);
        if (mode === 'page') expect(c.length % PAGE).toBe(0);
      }
      const avg = data.length / a.length;
      expect(avg).toBeGreaterThan(O.minBytes);
      expect(avg).toBeLessThan(O.maxBytes);
      // Same boundaries when fed in odd pieces.
      expect(hashes(chunk(data, mode, [1, 4095, 70_001, 333, 1 << 19]))).toEqual(hashes(a));
    });
  }

  it('page: realigns after pages are inserted or removed, as gVisor page files shift', () => {
    const pages = randomBytes(2048 * PAGE); // 8 MiB
    const a = chunk(pages, 'page');
    // Three pages inserted near the start, one removed in the middle, 64 KiB overwritten later.
    const b = Buffer.concat([
      pages.subarray(0, 10 * PAGE),
      randomBytes(3 * PAGE),
      pages.subarray(10 * PAGE, 900 * PAGE),
      pages.subarray(901 * PAGE, 1500 * PAGE),
      randomBytes(16 * PAGE),
      pages.subarray(1516 * PAGE),
    ]);
    const changed = newBytes(a, chunk(b, 'page'));
    // Each edit costs about one chunk on either side of it.
    expect(changed).toBeLessThan(8 * O.maxBytes);
    expect(changed / b.length).toBeLessThan(0.15);
  });

  it('gear: realigns after a byte-level insertion', () => {
    const data = randomBytes(4 * 1024 * 1024);
    const a = chunk(data, 'gear');
    const b = Buffer.concat([data.subarray(0, 1_000_003), Buffer.from('x'), data.subarray(1_000_003)]);
    expect(newBytes(a, chunk(b, 'gear'))).toBeLessThan(3 * O.maxBytes);
  });

  it('fixed-size chunks would not realign: the reason for content-defined ones', () => {
    const pages = randomBytes(512 * PAGE);
    const shifted = Buffer.concat([randomBytes(PAGE), pages]);
    const fixed = (d: Buffer) =>
      Array.from({ length: Math.ceil(d.length / 65536) }, (_, i) => d.subarray(i * 65536, (i + 1) * 65536));
    expect(newBytes(fixed(pages), fixed(shifted))).toBe(shifted.length);
    expect(newBytes(chunk(pages, 'page'), chunk(shifted, 'page'))).toBeLessThan(2 * O.maxBytes);
  });

  it('handles empty and tiny inputs', () => {
    expect(chunk(Buffer.alloc(0), 'gear')).toEqual([]);
    expect(chunk(Buffer.from('abc'), 'gear').map((c) => c.toString())).toEqual(['abc']);
    expect(Buffer.concat(chunk(Buffer.alloc(PAGE + 5, 1), 'page')).length).toBe(PAGE + 5);
  });

  it('cuts zero pages at the maximum size', () => {
    const zeros = Buffer.alloc(4 * O.maxBytes);
    const c = chunk(zeros, 'page');
    expect(Buffer.concat(c).equals(zeros)).toBe(true);
    expect(new Set(hashes(c)).size).toBeLessThanOrEqual(2);
  });

  it('picks the page cutter for page-multiple files only', () => {
    expect(chunkModeFor(231_636_992, O)).toBe('page');
    expect(chunkModeFor(848_713, O)).toBe('gear');
    expect(chunkModeFor(0, O)).toBe('gear');
  });

  it('validates options', () => {
    expect(validateChunking({})).toEqual(DEFAULT_CHUNKING);
    expect(() => validateChunking({ minBytes: 1000 })).toThrow(SnapshotInvalidError);
    expect(() => validateChunking({ avgBytes: 1 << 20 })).toThrow(/minBytes <= avgBytes <= maxBytes/);
    expect(() => validateChunking({ maxBytes: 128 * 1024 * 1024 })).toThrow(/maxBytes/);
    expect(() => validateChunking({ pageBytes: 0 })).toThrow(/pageBytes/);
  });
});
