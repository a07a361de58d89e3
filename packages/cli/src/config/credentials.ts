import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile, chmod } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { CliError } from '../errors.js';

/** Where `aenv auth` keeps the server URL and API key. */
export interface Credentials {
  url: string;
  apiKey: string;
}

/** The server's default listen address, used when only a key is configured. */
export const DEFAULT_URL = 'http://127.0.0.1:8000';

export function credentialsPath(home: string = homedir()): string {
  return path.join(home, '.config', 'aenv', 'credentials');
}

/** Reads the credentials file; undefined when there is none. */
export async function readCredentialsFile(
  file = credentialsPath(),
): Promise<Partial<Credentials> | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    return {
      ...(typeof parsed.url === 'string' ? { url: parsed.url } : {}),
      ...(typeof parsed.apiKey === 'string' ? { apiKey: parsed.apiKey } : {}),
    };
  } catch {
    throw new CliError(`${file} is not valid JSON`, 1, 'Run `aenv auth` to write it again.');
  }
}

/** Writes the credentials file with mode 0600 (its directory 0700), atomically. */
export async function writeCredentialsFile(creds: Credentials, file = credentialsPath()): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, JSON.stringify({ url: creds.url, apiKey: creds.apiKey }, null, 2) + '\n', {
      mode: 0o600,
      flag: 'wx',
    });
    await chmod(tmp, 0o600);
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** Normalizes a server URL: a scheme is required, a trailing slash dropped. */
export function normalizeUrl(raw: string): string {
  const text = raw.trim();
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text))
    throw new CliError(`invalid server URL ${JSON.stringify(text)}: it needs http:// or https://`, 2);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new CliError(`invalid server URL: ${JSON.stringify(text)}`, 2, 'Example: http://127.0.0.1:8000');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CliError(`invalid server URL: ${text} (use http:// or https://)`, 2);
  return url.toString().replace(/\/+$/, '');
}

export interface ResolvedCredentials extends Credentials {
  /** Where the key came from, for `aenv auth --show` and error messages. */
  source: 'env' | 'file';
}

/**
 * The credentials in effect: AENV_URL / AENV_API_KEY override the file, field by field. Throws a
 * "not authenticated" error when no key is configured anywhere.
 */
export async function resolveCredentials(
  env: NodeJS.ProcessEnv = process.env,
  file = credentialsPath(),
): Promise<ResolvedCredentials> {
  const stored = await readCredentialsFile(file);
  const apiKey = env.AENV_API_KEY || stored?.apiKey;
  if (!apiKey) {
    throw new CliError(
      'not authenticated: no API key configured',
      1,
      'Run `aenv auth` (or set AENV_URL and AENV_API_KEY).',
    );
  }
  const url = normalizeUrl(env.AENV_URL || stored?.url || DEFAULT_URL);
  return { url, apiKey, source: env.AENV_API_KEY ? 'env' : 'file' };
}

/** `e2b_0123…cdef` style masking for display. */
export function maskKey(key: string): string {
  if (key.length <= 12) return '*'.repeat(key.length);
  return `${key.slice(0, 8)}…${key.slice(-4)}`;
}
