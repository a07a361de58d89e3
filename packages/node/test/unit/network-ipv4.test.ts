import { describe, expect, it } from 'vitest';
import {
  cidrContains,
  cidrContainsAddress,
  cidrOverlaps,
  cidrSize,
  formatCidr,
  formatIPv4,
  maskOf,
  parseCidr,
  parseIPv4,
} from '../../src/network/ipv4.js';

const cidr = (text: string) => {
  const parsed = parseCidr(text);
  if (!parsed) throw new Error(`bad test CIDR ${text}`);
  return parsed;
};

describe('parseIPv4 / formatIPv4', () => {
  it('round-trips dotted quads, including the extremes', () => {
    for (const text of ['0.0.0.0', '10.0.2.2', '203.0.113.1', '255.255.255.255']) {
      const value = parseIPv4(text);
      expect(value).toBeDefined();
      expect(formatIPv4(value as number)).toBe(text);
    }
    expect(parseIPv4('255.255.255.255')).toBe(0xffffffff);
  });

  it('refuses anything that is not exactly four decimal octets', () => {
    for (const text of [
      '',
      '1.2.3',
      '1.2.3.4.5',
      '256.0.0.1',
      '1.2.3.-1',
      '01.2.3.4',
      '1.2.3.4 ',
      'a.b.c.d',
      '0x1.2.3.4',
    ]) {
      expect(parseIPv4(text), text).toBeUndefined();
    }
  });
});

describe('parseCidr', () => {
  it('reads a bare address as a /32 and clears host bits', () => {
    expect(formatCidr(cidr('203.0.113.7'))).toBe('203.0.113.7/32');
    expect(formatCidr(cidr('10.1.2.3/8'))).toBe('10.0.0.0/8');
    expect(formatCidr(cidr('0.0.0.0/0'))).toBe('0.0.0.0/0');
    expect(formatCidr(cidr('192.168.1.255/31'))).toBe('192.168.1.254/31');
  });

  it('refuses bad prefixes', () => {
    for (const text of ['10.0.0.0/33', '10.0.0.0/', '10.0.0.0/-1', '10.0.0.0/08', '10.0.0.0/8/8', '/8']) {
      expect(parseCidr(text), text).toBeUndefined();
    }
  });
});

describe('CIDR arithmetic', () => {
  it('computes masks and sizes', () => {
    expect(maskOf(0)).toBe(0);
    expect(maskOf(32)).toBe(0xffffffff);
    expect(maskOf(24)).toBe(0xffffff00);
    expect(cidrSize(cidr('10.201.0.0/16'))).toBe(65536);
  });

  it('tells containment and overlap apart', () => {
    expect(cidrContains(cidr('10.0.0.0/8'), cidr('10.201.0.0/16'))).toBe(true);
    expect(cidrContains(cidr('10.201.0.0/16'), cidr('10.0.0.0/8'))).toBe(false);
    expect(cidrOverlaps(cidr('10.201.0.0/16'), cidr('10.0.0.0/8'))).toBe(true);
    expect(cidrOverlaps(cidr('10.0.2.0/24'), cidr('10.201.0.0/16'))).toBe(false);
    expect(cidrContainsAddress(cidr('169.254.0.0/16'), parseIPv4('169.254.169.254') as number)).toBe(true);
    expect(cidrContainsAddress(cidr('0.0.0.0/0'), 0xffffffff)).toBe(true);
  });
});
