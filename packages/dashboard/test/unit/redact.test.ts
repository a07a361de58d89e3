import { describe, expect, it } from 'vitest';
import { redactSecrets } from '../../src/shared/redact.js';

describe('secret redaction', () => {
  it('drops token, key and password fields at any depth and keeps the rest', () => {
    const body = {
      sandboxID: 'abc',
      envdAccessToken: 'secret-1',
      trafficAccessToken: 'secret-2',
      metadata: { owner: 'me' },
      url: { headers: { 'x-api-key': 'secret-3' }, present: false },
      registryAuth: [{ username: 'u', password: 'secret-4' }],
    };
    const out = redactSecrets(body);
    expect(JSON.stringify(out)).not.toMatch(/secret-/);
    expect(out).toEqual({
      sandboxID: 'abc',
      metadata: { owner: 'me' },
      url: { headers: {}, present: false },
      registryAuth: [{ username: 'u' }],
    });
  });

  it('passes through scalars and null', () => {
    expect(redactSecrets(null)).toBeNull();
    expect(redactSecrets(3)).toBe(3);
    expect(redactSecrets(['a'])).toEqual(['a']);
  });
});
