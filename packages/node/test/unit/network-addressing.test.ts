import { describe, expect, it } from 'vitest';
import { IndexAllocator, slotAddresses, slotCapacity } from '../../src/network/addressing.js';
import { NetworkError } from '../../src/network/errors.js';
import { parseCidr } from '../../src/network/ipv4.js';

const range = parseCidr('10.201.0.0/16') ?? { network: 0, prefix: 0 };

describe('slotAddresses', () => {
  it('gives slot N the N-th /31 of the range', () => {
    expect(slotAddresses(range, 0)).toEqual({ rootSide: '10.201.0.0', hostAddress: '10.201.0.1' });
    expect(slotAddresses(range, 1)).toEqual({ rootSide: '10.201.0.2', hostAddress: '10.201.0.3' });
    expect(slotAddresses(range, 128)).toEqual({ rootSide: '10.201.1.0', hostAddress: '10.201.1.1' });
    expect(slotAddresses(range, 32767)).toEqual({
      rootSide: '10.201.255.254',
      hostAddress: '10.201.255.255',
    });
  });

  it('refuses indexes outside the range', () => {
    expect(() => slotAddresses(range, 32768)).toThrow(NetworkError);
    expect(() => slotAddresses(range, -1)).toThrow(NetworkError);
  });

  it('limits capacity by range size and name length', () => {
    expect(slotCapacity(range, 1e9)).toBe(32768);
    expect(slotCapacity(range, 100)).toBe(100);
  });
});

describe('IndexAllocator', () => {
  it('hands out the lowest free index and reuses released ones', () => {
    const allocator = new IndexAllocator(4);
    expect([allocator.allocate(), allocator.allocate(), allocator.allocate()]).toEqual([0, 1, 2]);
    allocator.release(1);
    allocator.release(1);
    expect(allocator.inUse).toBe(2);
    expect(allocator.allocate()).toBe(1);
    expect(allocator.allocate()).toBe(3);
    try {
      allocator.allocate();
      expect.unreachable();
    } catch (error) {
      expect((error as NetworkError).code).toBe('EXHAUSTED');
    }
    allocator.release(0);
    expect(allocator.allocate()).toBe(0);
  });
});
