import { describe, expect, it } from 'vitest';
import { spillCreateBody } from '../../src/handlers/fork.js';

describe("a spilled fork child's create body", () => {
  const settings = {
    timeout: 420,
    metadata: { a: 'b' },
    envVars: { K: 'v' },
    autoPause: true,
    autoPauseMemory: false,
    autoResume: { enabled: false },
    secure: true,
    allow_internet_access: false,
    network: { allowOut: ['10.0.0.1'], denyOut: [], allowPublicTraffic: false },
  };

  it('is the parent node settings of a child, started from the spill snapshot', () => {
    expect(spillCreateBody(settings, 'snap1', { count: 3 })).toEqual({ ...settings, templateID: 'snap1' });
  });

  it("takes the fork's own timeout, and never a template the settings name", () => {
    expect(spillCreateBody({ ...settings, templateID: 'other' }, 'snap1', { timeout: 60 })).toEqual({
      ...settings,
      timeout: 60,
      templateID: 'snap1',
    });
  });
});
