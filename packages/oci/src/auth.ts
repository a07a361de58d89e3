import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { DOCKER_HUB } from './reference.js';

/** Credentials for one registry: a user name and password (or access token used as password), or an identity token. */
export type Credentials =
  { readonly username: string; readonly password: string } | { readonly identityToken: string };

/** One `WWW-Authenticate` challenge: its scheme (lower-cased) and parameters. */
export interface Challenge {
  readonly scheme: string;
  readonly params: Readonly<Record<string, string>>;
}

/**
 * Parses a `WWW-Authenticate` header (RFC 7235): `Bearer realm="…",service="…",scope="…"`,
 * `Basic realm="…"`, possibly several challenges in one header. Quoted values may contain commas
 * and escaped quotes.
 */
export function parseChallenges(header: string): Challenge[] {
  const out: { scheme: string; params: Record<string, string> }[] = [];
  let i = 0;
  const n = header.length;
  const skipWs = () => {
    while (i < n && (header[i] === ' ' || header[i] === '\t')) i++;
  };
  const token = () => {
    const start = i;
    while (i < n && /[!#$%&'*+\-.^_`|~0-9A-Za-z]/.test(header[i]!)) i++;
    return header.slice(start, i);
  };
  while (i < n) {
    skipWs();
    if (header[i] === ',') {
      i++;
      continue;
    }
    const word = token();
    if (!word) {
      i++;
      continue;
    }
    skipWs();
    if (header[i] === '=' && out.length > 0) {
      // key=value of the current challenge
      i++;
      skipWs();
      let value = '';
      if (header[i] === '"') {
        i++;
        while (i < n && header[i] !== '"') {
          if (header[i] === '\\' && i + 1 < n) i++;
          value += header[i];
          i++;
        }
        i++;
      } else {
        const start = i;
        while (i < n && header[i] !== ',') i++;
        value = header.slice(start, i).trim();
      }
      out[out.length - 1]!.params[word.toLowerCase()] = value;
      continue;
    }
    out.push({ scheme: word.toLowerCase(), params: {} });
  }
  return out;
}

/** `repository:<name>:pull`, the scope a pull needs. */
export function pullScope(repository: string): string {
  return `repository:${repository}:pull`;
}

interface DockerConfigEntry {
  auth?: unknown;
  username?: unknown;
  password?: unknown;
  identitytoken?: unknown;
}

/** `https://index.docker.io/v1/` → `index.docker.io`; `http://host:5000/x` → `host:5000`. */
function configKeyHost(key: string): string {
  return key
    .replace(/^[a-z]+:\/\//i, '')
    .replace(/\/.*$/, '')
    .toLowerCase();
}

const HUB_KEYS = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io', 'registry.hub.docker.com']);

/**
 * Credentials for `registry` from a docker-style `config.json` (`auths` section: `auth` =
 * base64("user:password"), or `username`/`password`, or `identitytoken`). Credential helpers
 * (`credsStore`, `credHelpers`) are not run. Returns undefined when the file or entry is absent.
 */
export async function credentialsFromAuthFile(
  file: string,
  registry: string,
): Promise<Credentials | undefined> {
  let doc: { auths?: Record<string, DockerConfigEntry> };
  try {
    doc = JSON.parse(await readFile(file, 'utf8')) as typeof doc;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read registry credentials from ${file}: ${(e as Error).message}`, { cause: e });
  }
  const auths = doc.auths && typeof doc.auths === 'object' ? doc.auths : {};
  const want = registry.toLowerCase();
  const entry = Object.entries(auths).find(([key]) => {
    const host = configKeyHost(key);
    return host === want || (want === DOCKER_HUB && HUB_KEYS.has(host));
  })?.[1];
  if (!entry || typeof entry !== 'object') return undefined;
  if (typeof entry.identitytoken === 'string' && entry.identitytoken) {
    return { identityToken: entry.identitytoken };
  }
  if (typeof entry.auth === 'string' && entry.auth) {
    const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
  }
  if (typeof entry.username === 'string' && typeof entry.password === 'string') {
    return { username: entry.username, password: entry.password };
  }
  return undefined;
}

/** Where docker keeps its config: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`. */
export function defaultAuthFile(env: NodeJS.ProcessEnv = process.env): string {
  return env.DOCKER_CONFIG
    ? join(env.DOCKER_CONFIG, 'config.json')
    : join(homedir(), '.docker', 'config.json');
}

export function basicAuthHeader(c: { username: string; password: string }): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`, 'utf8').toString('base64')}`;
}
