import { describe, expect, it } from 'vitest';
import { NetworkError } from '../../src/network/errors.js';
import {
  chainNames,
  indexLimitForTag,
  resourcePrefixes,
  slotNames,
  validateNodeTag,
} from '../../src/network/naming.js';

describe('names', () => {
  it('derives every name of a slot from the tag and index', () => {
    expect(slotNames('n0', 7)).toEqual({
      routerNs: 'aenv-n0-r7',
      sandboxNs: 'aenv-n0-s7',
      sandboxNsPath: '/run/netns/aenv-n0-s7',
      hostVeth: 'ae-n0-7',
    });
    expect(chainNames('n0')).toEqual({
      forward: 'AENV-n0-FWD',
      input: 'AENV-n0-IN',
      postrouting: 'AENV-n0-NAT',
    });
  });

  it('keeps interface names within 15 characters up to the index limit', () => {
    for (const tag of ['a', 'n0', 'abcdef']) {
      const last = indexLimitForTag(tag) - 1;
      expect(slotNames(tag, last).hostVeth.length).toBeLessThanOrEqual(15);
      expect(slotNames(tag, last + 1).hostVeth.length).toBeGreaterThan(15);
    }
  });

  it("never lets one tag's prefix match another tag's names", () => {
    const tags = ['n1', 'n12', 'n1a', 'a'];
    for (const tag of tags) {
      for (const other of tags.filter((t) => t !== tag)) {
        const mine = resourcePrefixes(tag);
        const theirs = slotNames(other, 3);
        expect(theirs.hostVeth.startsWith(mine.veth)).toBe(false);
        expect(theirs.routerNs.startsWith(mine.namespace)).toBe(false);
        expect(chainNames(other).forward.startsWith(mine.chain)).toBe(false);
      }
    }
  });

  it('validates tags', () => {
    expect(() => validateNodeTag('n0')).not.toThrow();
    for (const bad of ['', 'N0', 'n-0', 'n_0', 'toolong7']) {
      expect(() => validateNodeTag(bad), bad).toThrow(NetworkError);
    }
  });
});
