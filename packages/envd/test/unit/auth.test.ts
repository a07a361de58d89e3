import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { basicAuthUser, checkFileSignature, fileSignature, safeEqual } from '../../src/auth.js';

const sha = (s: string) => 'v1_' + createHash('sha256').update(s).digest('base64').replace(/=+$/, '');

describe('file signatures', () => {
  it('hash path:operation:user:token[:expiry] like E2B', () => {
    expect(fileSignature('/a', 'read', 'user', 'tok')).toBe(sha('/a:read:user:tok'));
    expect(fileSignature('/a', 'write', '', 'tok', 42)).toBe(sha('/a:write::tok:42'));
    expect(fileSignature('/a', 'read', 'u', 't')).not.toMatch(/=/);
  });

  const base = { path: '/f', operation: 'read' as const, token: 'tok', nowSeconds: 1000 };

  it('accepts a valid signature and rejects a forged or missing one', () => {
    const signature = fileSignature('/f', 'read', 'user', 'tok');
    expect(checkFileSignature({ ...base, signature, expiry: undefined, username: 'user' })).toEqual({
      ok: true,
    });
    expect(checkFileSignature({ ...base, signature, expiry: undefined, username: 'root' })).toEqual({
      ok: false,
      reason: 'invalid signature',
    });
    expect(
      checkFileSignature({ ...base, signature: undefined, expiry: undefined, username: 'user' }),
    ).toEqual({
      ok: false,
      reason: 'missing signature query parameter',
    });
    const write = fileSignature('/f', 'write', 'user', 'tok');
    expect(checkFileSignature({ ...base, signature: write, expiry: undefined, username: 'user' }).ok).toBe(
      false,
    );
  });

  it('rejects an expired signature with the E2B message', () => {
    const signature = fileSignature('/f', 'read', 'user', 'tok', 999);
    expect(checkFileSignature({ ...base, signature, expiry: '999', username: 'user' })).toEqual({
      ok: false,
      reason: 'signature is already expired',
    });
    const later = fileSignature('/f', 'read', 'user', 'tok', 2000);
    expect(checkFileSignature({ ...base, signature: later, expiry: '2000', username: 'user' }).ok).toBe(true);
    expect(checkFileSignature({ ...base, signature: later, expiry: 'soon', username: 'user' }).ok).toBe(
      false,
    );
  });

  it('accepts unnamed-user signatures made as "" or as the JS SDK\'s "undefined"', () => {
    for (const u of ['', 'undefined']) {
      const signature = fileSignature('/f', 'read', u, 'tok');
      expect(checkFileSignature({ ...base, signature, expiry: undefined, username: undefined }).ok).toBe(
        true,
      );
    }
  });
});

describe('basic auth and comparisons', () => {
  it('reads the username of a Basic header', () => {
    expect(basicAuthUser(`Basic ${Buffer.from('user:').toString('base64')}`)).toBe('user');
    expect(basicAuthUser(`basic ${Buffer.from('root').toString('base64')}`)).toBe('root');
    expect(basicAuthUser('Bearer x')).toBeUndefined();
    expect(basicAuthUser(undefined)).toBeUndefined();
    expect(basicAuthUser(`Basic ${Buffer.from(':').toString('base64')}`)).toBeUndefined();
  });

  it('compares strings of any length safely', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
    expect(safeEqual('abc', 'abcd')).toBe(false);
  });
});
