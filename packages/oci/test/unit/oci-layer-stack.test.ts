import { describe, expect, it } from 'vitest';
import { layerStack } from '../../src/pull.js';

describe('layerStack', () => {
  it('keeps every layer, lowest first, when none is opaque at its root', () => {
    expect(layerStack([false, false, false], ['a', 'b', 'c'])).toEqual(['a', 'b', 'c']);
  });

  it('starts at the topmost layer that is opaque at its root', () => {
    expect(layerStack([true, false, true, false], ['a', 'b', 'c', 'd'])).toEqual(['c', 'd']);
    expect(layerStack([false, false, true], ['a', 'b', 'c'])).toEqual(['c']);
  });

  it('keeps only the topmost occurrence of a repeated layer', () => {
    expect(layerStack([false, false, false, false], ['a', 'b', 'a', 'c'])).toEqual(['b', 'a', 'c']);
  });

  it('is empty for an image without layers', () => {
    expect(layerStack([], [])).toEqual([]);
  });
});
