import { describe, expect, it } from 'vitest';
import { seal, sealingKey, unseal } from '../../src/security/sealing.js';

describe('sealing (AES-256-GCM)', () => {
  const key = sealingKey('installation-secret', 'test');

  it('opens what it sealed, with the same key and context only', () => {
    const sealed = seal(key, '{"token":"abc"}', 'sandbox-1');
    expect(sealed).not.toContain('abc');
    expect(unseal(key, sealed, 'sandbox-1')).toBe('{"token":"abc"}');
    expect(unseal(key, sealed, 'sandbox-2')).toBeUndefined();
    expect(unseal(sealingKey('another-secret', 'test'), sealed, 'sandbox-1')).toBeUndefined();
    expect(unseal(sealingKey('installation-secret', 'other'), sealed, 'sandbox-1')).toBeUndefined();
  });

  it('seals the same text differently each time', () => {
    expect(seal(key, 'x', 'c')).not.toBe(seal(key, 'x', 'c'));
  });

  it('refuses a tampered or malformed text', () => {
    const sealed = seal(key, 'secret text', 'c');
    const [format, iv, tag, data] = sealed.split('.');
    const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
    for (const bad of [
      [format, iv, tag, flip(data!)],
      [format, iv, flip(tag!), data],
      [format, flip(iv!), tag, data],
      ['other-format', iv, tag, data],
      [format, iv, tag],
      [format, iv, tag, data, 'extra'],
      [format, iv!.slice(2), tag, data],
    ])
      expect(unseal(key, bad.join('.'), 'c')).toBeUndefined();
    expect(unseal(key, '', 'c')).toBeUndefined();
  });
});
