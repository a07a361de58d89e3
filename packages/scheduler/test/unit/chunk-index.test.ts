import { describe, expect, it } from 'vitest';
import { ChunkIndex } from '../../src/chunks/chunk-index.js';

describe('ChunkIndex', () => {
  it('maps keys to the nodes that advertised them and follows replacements', () => {
    const idx = new ChunkIndex();
    idx.replace('a', 'd1', ['k1', 'k2']);
    idx.replace('b', 'd2', ['k2']);
    expect(idx.peers('k2').sort()).toEqual(['a', 'b']);
    idx.replace('a', 'd3', ['k3']);
    expect(idx.peers('k1')).toEqual([]);
    expect(idx.peers('k2')).toEqual(['b']);
    expect(idx.digest('a')).toBe('d3');
    idx.forget('b');
    expect(idx.peers('k2')).toEqual([]);
    expect(idx.size).toBe(1);
  });

  it('is bounded: the least recently advertised keys go first', () => {
    const idx = new ChunkIndex(3);
    idx.replace('a', 'x', ['k1', 'k2']);
    idx.replace('b', 'y', ['k3', 'k1']);
    idx.replace('c', 'z', ['k4']);
    expect(idx.size).toBe(3);
    expect(idx.peers('k2')).toEqual([]);
    expect(idx.peers('k1').sort()).toEqual(['a', 'b']);
    // A node re-advertising after an eviction gets its key back.
    idx.replace('a', 'x2', ['k1', 'k2']);
    expect(idx.peers('k2')).toEqual(['a']);
  });
});
