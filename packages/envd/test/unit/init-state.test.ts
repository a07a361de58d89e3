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
    s.init({ envVars: { A: '1' }, timestamp: at(NOW + INIT_CLOCK_SKEW_MS) });
    s.init({ envVars: { A: 'stale' }, timestamp: at(NOW) });
    expect(s.envVars).toEqual({ A: '1' });
  });
});
