import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeApiKey } from '../../src/security/index.js';

const KEY = 'e2b_' + 'c0ffee00'.repeat(5);

describe('the API key in the startup banner', () => {
  const homes: string[] = [];
  const home = () => {
    const h = mkdtempSync(path.join(tmpdir(), 'aenv-key-'));
    homes.push(h);
    return h;
  };
  afterEach(() => {
    for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
  });

  it('shows a key only on the start that generated it, then where it is', () => {
    const h = home();
    const first = nodeApiKey(undefined, h, {});
    const file = path.join(h, 'secrets', 'api-key');
    expect(readFileSync(file, 'utf8').trim()).toBe(first.value);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(first.banner).toEqual({ text: first.value, shell: first.value });

    const again = nodeApiKey(undefined, h, {});
    expect(again.value).toBe(first.value);
    expect(again.banner).toEqual({ text: `not printed, it is in ${file}`, shell: `$(cat ${file})` });
  });

  it('never shows a key from the environment, a key file or the config file', () => {
    const h = home();
    const fromEnv = nodeApiKey(KEY, h, { AENV_API_KEY: KEY, AENV_API_KEY_FILE: '/run/k' });
    expect(fromEnv.banner).toEqual({ text: 'not printed, it is AENV_API_KEY', shell: '$AENV_API_KEY' });
    const fromFile = nodeApiKey(KEY, h, { AENV_API_KEY_FILE: '/run/secrets/aenv key' });
    expect(fromFile.banner).toEqual({
      text: 'not printed, it is in /run/secrets/aenv key',
      shell: `$(cat '/run/secrets/aenv key')`,
    });
    const fromToml = nodeApiKey(KEY, h, { AENV_CONFIG_PATH: '/etc/aenv/config.toml' });
    expect(fromToml.banner.text).toBe('not printed, it is api_key in /etc/aenv/config.toml');
    for (const k of [fromEnv, fromFile, fromToml]) {
      expect(k.value).toBe(KEY);
      expect(JSON.stringify(k.banner)).not.toContain(KEY);
    }
  });
});
