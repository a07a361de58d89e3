import { mkdtemp, readFile, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  credentialsPath,
  DEFAULT_URL,
  maskKey,
  normalizeUrl,
  resolveCredentials,
  writeCredentialsFile,
} from '../../src/config/credentials.js';
import { apiErrorFor } from '../../src/client/api.js';

let home: string;
beforeEach(async () => {
  home = await mkdtemp(path.join(tmpdir(), 'aenv-home-'));
});
afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

describe('credentials file', () => {
  it('lives in ~/.config/aenv and is written with mode 0600', async () => {
    const file = credentialsPath(home);
    expect(file).toBe(path.join(home, '.config', 'aenv', 'credentials'));
    await writeCredentialsFile({ url: 'http://h:1', apiKey: 'k1' }, file);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(path.dirname(file))).mode & 0o777).toBe(0o700);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ url: 'http://h:1', apiKey: 'k1' });
    await writeCredentialsFile({ url: 'http://h:2', apiKey: 'k2' }, file);
    expect(await resolveCredentials({}, file)).toEqual({ url: 'http://h:2', apiKey: 'k2', source: 'file' });
  });

  it('is overridden field by field by AENV_URL and AENV_API_KEY', async () => {
    const file = credentialsPath(home);
    await writeCredentialsFile({ url: 'http://file:1', apiKey: 'filekey' }, file);
    expect(await resolveCredentials({ AENV_API_KEY: 'envkey' }, file)).toEqual({
      url: 'http://file:1',
      apiKey: 'envkey',
      source: 'env',
    });
    expect((await resolveCredentials({ AENV_URL: 'https://env/' }, file)).url).toBe('https://env');
  });

  it('says "not authenticated" without a key and defaults the URL with one', async () => {
    const file = credentialsPath(home);
    await expect(resolveCredentials({}, file)).rejects.toThrow(/not authenticated/);
    expect((await resolveCredentials({ AENV_API_KEY: 'k' }, file)).url).toBe(DEFAULT_URL);
  });

  it('reports a corrupt file', async () => {
    const file = credentialsPath(home);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, '{nope');
    await expect(resolveCredentials({}, file)).rejects.toThrow(/not valid JSON/);
  });

  it('validates URLs and masks keys', () => {
    expect(normalizeUrl(' http://127.0.0.1:8000/ ')).toBe('http://127.0.0.1:8000');
    expect(() => normalizeUrl('127.0.0.1:8000')).toThrow(/http/);
    expect(() => normalizeUrl('ftp://x')).toThrow(/http/);
    expect(maskKey('e2b_0123456789abcdef0123')).toBe('e2b_0123…0123');
    expect(maskKey('short')).toBe('*****');
  });
});

describe('API error messages', () => {
  const ctx = { method: 'GET', path: '/templates', url: 'http://h' };
  it('explains 401, unsupported endpoints and plain errors', () => {
    expect(apiErrorFor(401, { code: 401, message: 'invalid API key' }, ctx).message).toMatch(
      /authentication failed: http:\/\/h rejected the API key/,
    );
    expect(
      apiErrorFor(
        404,
        { code: 404, message: 'no route for GET /templates' },
        { ...ctx, feature: 'templates' },
      ).message,
    ).toMatch(/does not support templates yet \(HTTP 404/);
    expect(apiErrorFor(501, undefined, ctx).message).toMatch(
      /does not support GET \/templates yet \(HTTP 501\)/,
    );
    expect(apiErrorFor(404, { code: 404, message: 'sandbox x not found' }, ctx).message).toBe(
      'sandbox x not found',
    );
    expect(apiErrorFor(409, { code: 409, message: 'already paused' }, ctx).status).toBe(409);
    expect(apiErrorFor(500, '', ctx).message).toBe('HTTP 500 from GET /templates');
  });
});
