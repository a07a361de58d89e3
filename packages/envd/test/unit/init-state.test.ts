import { describe, expect, it } from 'vitest';
import { EnvdError } from '../../src/errors.js';
import { EnvdState, INIT_CLOCK_SKEW_MS } from '../../src/state.js';

describe('/init state', () => {
  const NOW = Date.parse('2026-06-01T00:00:00Z');
  const state = () => new EnvdState({ defaultUser: 'root', now: () => NOW });
  const at = (ms: number) => new Date(ms).toISOString();

  it('refuses a timestamp from beyond the clock skew ahead, leaving later inits applied', () => {
    const s = state();
    const far = () => s.init({ accessToken: 'attacker', timestamp: at(NOW + 3_600_000) });
    expect(far).toThrow(EnvdError);
    expect(far).toThrow(/ahead of the sandbox's clock/);
    expect(s.accessToken).toBeUndefined();
    s.init({ accessToken: 'node', timestamp: at(NOW) });
    expect(s.accessToken).toBe('node');
  });

  it('takes a timestamp within the skew, and ignores one older than the last applied', () => {
    const s = state();
    expect(s.init({ envVars: { A: '1' }, timestamp: at(NOW + INIT_CLOCK_SKEW_MS) })).toBe(true);
    expect(s.init({ envVars: { A: 'stale' }, timestamp: at(NOW) })).toBe(false);
    expect(s.envVars).toEqual({ A: '1' });
  });

  it('refuses a boot id that is not a lower-case UUID, applying nothing of that init', () => {
    const s = state();
    for (const bootId of ['', 'x', '../../etc/passwd', 'ABCDEF01-2345-6789-ABCD-EF0123456789', 7]) {
      expect(() => s.init({ bootId: bootId as string, envVars: { A: '1' } })).toThrow(/bootId must be/);
    }
    expect(s.envVars).toEqual({});
    expect(s.init({ bootId: '0f2c6d0e-0b8a-4d8e-9a47-3b1f6c2f9e10' })).toBe(true);
  });
});
