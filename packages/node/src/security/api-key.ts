import path from 'node:path';
import { keyFromEnv, keyInFile, type BannerKey } from '@agentenv/common';
import { newApiKey, readOrCreateSecret } from './secrets.js';

export interface NodeApiKey {
  readonly value: string;
  /** What the startup banner shows for it: the key itself only when this start generated it. */
  readonly banner: BannerKey;
}

/**
 * The node's API key: the configured one (AENV_API_KEY, AENV_API_KEY_FILE or the config file's
 * `api_key`, as loadConfig chose), else the one in `$home/secrets/api-key`, generated there by
 * the first start.
 */
export function nodeApiKey(
  configured: string | undefined,
  home: string,
  env: Record<string, string | undefined> = process.env,
): NodeApiKey {
  if (configured) {
    const banner = keyFromEnv(env) ?? {
      text: `not printed, it is api_key in ${env.AENV_CONFIG_PATH ?? 'the config file'}`,
      shell: '<the API key>',
    };
    return { value: configured, banner };
  }
  const file = path.join(home, 'secrets', 'api-key');
  const { value, created } = readOrCreateSecret(file, newApiKey);
  return { value, banner: created ? { text: value, shell: value } : keyInFile(file) };
}
