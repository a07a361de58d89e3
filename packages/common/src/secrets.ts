import { readFileSync } from 'node:fs';

/**
 * What counts as a secret, in one place: a log field, an HTTP header or an environment variable
 * whose name says it holds a key, a token, a secret or a password (`X-API-Key`, `Authorization`,
 * `X-Access-Token`, `E2B-Traffic-Access-Token`, `apiKey`, `envdAccessToken`, `nodeSecret`,
 * `AENV_API_KEY`, `AWS_SECRET_ACCESS_KEY`, …). Its value is never logged nor handed to a child
 * program.
 */
const SECRET_NAME = /api[-_]?key|token|secret|passw(?:or)?d|authorization|cookie/i;

export const isSecretName = (name: string): boolean => SECRET_NAME.test(name);

export const REDACTED = '[Redacted]';

/** A JSON string (its quotes included). */
const JSON_STRING = String.raw`"(?:[^"\\]|\\.)*"`;
/**
 * A member of a JSON object whose value is a string or an array of strings. Outside a string a
 * `"` opens one; inside, every `"` is escaped, so `"name":` matches only where a member starts.
 */
const MEMBER = new RegExp(String.raw`"([^"\\]*)":(${JSON_STRING}|\[\s*(?:${JSON_STRING}\s*,?\s*)*\])`, 'g');

/**
 * A log line (pino's JSON) with the value of every member named like a secret replaced, at any
 * depth and in serialized errors too. Done on the finished line rather than with pino's `redact`
 * paths: those need a path per depth and cost a wildcard walk of every logged object.
 */
export function redactSecrets(line: string): string {
  return line.replace(MEMBER, (member, name: string) =>
    isSecretName(name) ? `"${name}":"${REDACTED}"` : member,
  );
}

/** pino options for a process's logger: its name, its level, and secrets redacted. */
export function logOptions(name: string, level: string) {
  return { name, level, hooks: { streamWrite: redactSecrets } };
}

/**
 * The environment a child program gets: `env` without the variables that hold a secret (the API
 * key above all). A variable naming a file (`…_FILE`) stays: it holds a path, and the file's own
 * permissions guard what is in it (a credential process may need one, e.g. a web identity token).
 */
export function withoutSecrets(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env))
    if (name.endsWith('_FILE') || !isSecretName(name)) out[name] = value;
  return out;
}

/**
 * How a startup banner speaks of an API key: `text` on its "API key:" line, `shell` in its
 * `export E2B_API_KEY=…` line. Only a key generated on this start is printed itself; any other
 * key stays where the operator put it, and the banner says where.
 */
export interface BannerKey {
  readonly text: string;
  readonly shell: string;
}

const shellWord = (s: string) => (/^[\w./@%+=:,-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);

/** A key in a file. */
export function keyInFile(file: string): BannerKey {
  return { text: `not printed, it is in ${file}`, shell: `$(cat ${shellWord(file)})` };
}

/** The key AENV_API_KEY or AENV_API_KEY_FILE gives (the first wins), if either is set. */
export function keyFromEnv(env: Record<string, string | undefined>): BannerKey | undefined {
  if (env.AENV_API_KEY) return { text: 'not printed, it is AENV_API_KEY', shell: '$AENV_API_KEY' };
  return env.AENV_API_KEY_FILE ? keyInFile(env.AENV_API_KEY_FILE) : undefined;
}

/** The shortest API key a node, a scheduler or a gateway starts with. */
export const MIN_API_KEY_LENGTH = 8;

/**
 * The API key AENV_API_KEY holds, else the one in the file AENV_API_KEY_FILE names (a mounted
 * secret; surrounding whitespace dropped), else undefined. Throws when the file cannot be read or
 * holds nothing: a secret mounted before it was filled in must not leave a service to start with
 * another key than the one its operator gave it.
 */
export function readApiKey(env: Record<string, string | undefined>): string | undefined {
  if (env.AENV_API_KEY) return env.AENV_API_KEY;
  const file = env.AENV_API_KEY_FILE;
  if (!file) return undefined;
  let key: string;
  try {
    key = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new Error(`cannot read AENV_API_KEY_FILE ${file}: ${(err as Error).message}`, { cause: err });
  }
  if (!key) throw new Error(`AENV_API_KEY_FILE ${file} is empty`);
  return key;
}

/** readApiKey's key, refused (thrown) when absent or shorter than MIN_API_KEY_LENGTH. */
export function requireApiKey(env: Record<string, string | undefined>): string {
  const key = readApiKey(env);
  const need = `at least ${MIN_API_KEY_LENGTH} characters`;
  if (!key)
    throw new Error(`the cluster API key is required: set AENV_API_KEY (or AENV_API_KEY_FILE), ${need}`);
  if (key.length < MIN_API_KEY_LENGTH) throw new Error(`the cluster API key is too short: ${need}`);
  return key;
}
