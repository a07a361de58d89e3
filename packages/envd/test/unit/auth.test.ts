import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { basicAuthUser, safeEqual } from '../../src/auth.js';
import {
  checkFileSignature,
  fileSignature,
  signatureMatches,
  signedFileRequest,
  type SignedFileRequest,
} from '../../src/file-signature.js';

const sha = (s: string) => 'v1_' + createHash('sha256').update(s).digest('base64').replace(/=+$/, '');

describe('file signatures', () => {
  it('hash path:operation:user:token[:expiry] like E2B', () => {
    expect(fileSignature('/a', 'read', 'user', 'tok')).toBe(sha('/a:read:user:tok'));
    expect(fileSignature('/a', 'write', '', 'tok', 42)).toBe(sha('/a:write::tok:42'));
    expect(fileSignature('/a', 'read', 'u', 't')).not.toMatch(/=/);
  });

  const req = (r: Partial<SignedFileRequest>): SignedFileRequest => ({
    signature: undefined,
    expiry: undefined,
    path: '/f',
    operation: 'read',
    username: 'user',
    ...r,
  });
  const NOW = 1000;

  it('accepts a valid signature and rejects a forged, missing or other-operation one', () => {
    const signature = fileSignature('/f', 'read', 'user', 'tok');
    expect(checkFileSignature(req({ signature }), 'tok', NOW)).toEqual({ ok: true });
    expect(checkFileSignature(req({ signature, username: 'root' }), 'tok', NOW)).toEqual({
      ok: false,
      reason: 'invalid signature',
    });
    expect(checkFileSignature(req({ signature }), 'other-token', NOW).ok).toBe(false);
    expect(checkFileSignature(req({ signature, path: '/g' }), 'tok', NOW).ok).toBe(false);
    expect(checkFileSignature(req({}), 'tok', NOW)).toEqual({
      ok: false,
      reason: 'missing signature query parameter',
    });
    const write = fileSignature('/f', 'write', 'user', 'tok');
    expect(checkFileSignature(req({ signature: write }), 'tok', NOW).ok).toBe(false);
    expect(checkFileSignature(req({ signature: write, operation: 'write' }), 'tok', NOW).ok).toBe(true);
  });

  it('rejects an expired signature with the E2B message, and a changed expiry as invalid', () => {
    const signature = fileSignature('/f', 'read', 'user', 'tok', 999);
    expect(checkFileSignature(req({ signature, expiry: '999' }), 'tok', NOW)).toEqual({
      ok: false,
      reason: 'signature is already expired',
    });
    // Pushing the expiry forward breaks the signature.
    expect(checkFileSignature(req({ signature, expiry: '5000' }), 'tok', NOW)).toEqual({
      ok: false,
      reason: 'invalid signature',
    });
    const later = fileSignature('/f', 'read', 'user', 'tok', 2000);
    expect(checkFileSignature(req({ signature: later, expiry: '2000' }), 'tok', NOW).ok).toBe(true);
    // Valid through its expiry second.
    expect(checkFileSignature(req({ signature: later, expiry: '2000' }), 'tok', 2000).ok).toBe(true);
    expect(checkFileSignature(req({ signature: later, expiry: '2000' }), 'tok', 2001).ok).toBe(false);
    for (const expiry of ['soon', '1e3', '', '12.5']) {
      expect(checkFileSignature(req({ signature: later, expiry }), 'tok', NOW)).toEqual({
        ok: false,
        reason: 'invalid signature expiration',
      });
    }
  });

  it('accepts unnamed-user signatures made as "" or as older SDKs\' "undefined"', () => {
    for (const u of ['', 'undefined']) {
      const signature = fileSignature('/f', 'read', u, 'tok');
      expect(signatureMatches(req({ signature, username: undefined }), 'tok')).toBe(true);
    }
    // A named user must be signed as that name.
    expect(signatureMatches(req({ signature: fileSignature('/f', 'read', '', 'tok') }), 'tok')).toBe(false);
  });

  it('reads the signed fields of a /files query the way the SDK writes them', () => {
    const q = new URLSearchParams({ path: '/home/user/a b', signature: 'v1_x', signature_expiration: '7' });
    expect(signedFileRequest(q, 'POST')).toEqual({
      signature: 'v1_x',
      expiry: '7',
      path: '/home/user/a b',
      operation: 'write',
      username: undefined,
    });
    expect(signedFileRequest(new URLSearchParams('username=root'), 'GET')).toMatchObject({
      path: '',
      operation: 'read',
      username: 'root',
    });
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
