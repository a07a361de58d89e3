import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('scheduler config: the API key', () => {
  const KEY = 'e2b_0123456789';

  it('comes from AENV_API_KEY, else from AENV_API_KEY_FILE (trimmed)', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sched-key-'));
    try {
      writeFileSync(path.join(dir, 'key'), `  ${KEY}\n`);
      expect(loadConfig({ AENV_API_KEY: KEY }).apiKey).toBe(KEY);
      expect(loadConfig({ AENV_API_KEY_FILE: path.join(dir, 'key') }).apiKey).toBe(KEY);
      expect(loadConfig({ AENV_API_KEY: '', AENV_API_KEY_FILE: path.join(dir, 'key') }).apiKey).toBe(KEY);
      expect(() => loadConfig({ AENV_API_KEY_FILE: path.join(dir, 'absent') })).toThrow(
        /cannot read AENV_API_KEY_FILE/,
      );
      writeFileSync(path.join(dir, 'empty'), '\n');
      expect(() => loadConfig({ AENV_API_KEY_FILE: path.join(dir, 'empty') })).toThrow(/is empty/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it.each([{}, { AENV_API_KEY: 'e2b_01' }])('is refused when absent or short: %o', (env) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(/at least 8 characters/);
  });
});
