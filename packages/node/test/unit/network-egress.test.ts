import { describe, expect, it } from 'vitest';
import {
  MAX_EGRESS_ENTRIES,
  normalizeEgressEntry,
  sameEgress,
  validateEgressRules,
} from '../../src/network/egress.js';
import { NetworkError } from '../../src/network/errors.js';

function errorOf(fn: () => unknown): NetworkError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(NetworkError);
    return error as NetworkError;
  }
  throw new Error('expected a NetworkError');
}

describe('normalizeEgressEntry', () => {
  it('accepts IPv4 addresses and CIDRs, normalised', () => {
    expect(normalizeEgressEntry('203.0.113.7', 'allowOut')).toBe('203.0.113.7/32');
    expect(normalizeEgressEntry(' 198.51.100.0/24 ', 'allowOut')).toBe('198.51.100.0/24');
    expect(normalizeEgressEntry('198.51.100.9/24', 'denyOut')).toBe('198.51.100.0/24');
    expect(normalizeEgressEntry('0.0.0.0/0', 'denyOut')).toBe('0.0.0.0/0');
  });

  it('refuses domain names with a dedicated code and message', () => {
    for (const domain of ['example.com', '*.example.com', 'localhost', 'api.openai.com.']) {
      const error = errorOf(() => normalizeEgressEntry(domain, 'allowOut'));
      expect(error.code).toBe('DOMAIN_NOT_SUPPORTED');
      expect(error.message).toContain('domain entries are not supported');
      expect(error.message).toContain('allowOut');
    }
  });

  it('refuses IPv6 and garbage as INVALID_CIDR, naming the entry', () => {
    expect(errorOf(() => normalizeEgressEntry('::/0', 'denyOut')).message).toContain('IPv6');
    for (const bad of ['300.1.1.1', '10.0.0.0/40', '', '1.2.3.4/', '10.0.0.0/8; rm -rf /', 42, null]) {
      const error = errorOf(() => normalizeEgressEntry(bad, 'denyOut'));
      expect(error.code, String(bad)).toBe('INVALID_CIDR');
    }
  });
});

describe('validateEgressRules', () => {
  it('fills defaults and de-duplicates', () => {
    expect(validateEgressRules({})).toEqual({ allowInternet: true, allowOut: [], denyOut: [] });
    expect(
      validateEgressRules({
        allowInternet: false,
        allowOut: ['1.2.3.4', '1.2.3.4/32'],
        denyOut: ['5.6.7.0/24'],
      }),
    ).toEqual({ allowInternet: false, allowOut: ['1.2.3.4/32'], denyOut: ['5.6.7.0/24'] });
  });

  it('refuses wrong shapes', () => {
    expect(errorOf(() => validateEgressRules(null)).code).toBe('INVALID_CIDR');
    expect(errorOf(() => validateEgressRules({ allowInternet: 'yes' })).message).toContain('allowInternet');
    expect(errorOf(() => validateEgressRules({ allowOut: '1.2.3.4' })).message).toContain('allowOut');
    const tooMany = Array.from({ length: MAX_EGRESS_ENTRIES + 1 }, (_, i) => `198.18.${i >> 8}.${i & 255}`);
    expect(errorOf(() => validateEgressRules({ denyOut: tooMany })).message).toContain(
      `${MAX_EGRESS_ENTRIES}`,
    );
  });

  it('reports the first domain in either list', () => {
    expect(errorOf(() => validateEgressRules({ denyOut: ['1.1.1.1', 'evil.example'] })).code).toBe(
      'DOMAIN_NOT_SUPPORTED',
    );
  });
});

describe('sameEgress', () => {
  it('compares every field, order included', () => {
    const a = { allowInternet: true, allowOut: ['1.1.1.1/32'], denyOut: [] };
    expect(sameEgress(a, { ...a })).toBe(true);
    expect(sameEgress(a, { ...a, allowInternet: false })).toBe(false);
    expect(sameEgress(a, { ...a, allowOut: [] })).toBe(false);
    expect(sameEgress(a, { ...a, denyOut: ['1.1.1.1/32'] })).toBe(false);
  });
});
