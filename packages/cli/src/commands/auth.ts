import type { Command } from 'commander';
import { ApiClient } from '../client/api.js';
import {
  credentialsPath,
  DEFAULT_URL,
  maskKey,
  normalizeUrl,
  readCredentialsFile,
  resolveCredentials,
  writeCredentialsFile,
} from '../config/credentials.js';
import { contextOf } from '../context.js';
import { CliError, UsageError } from '../errors.js';
import { ask, askHidden, readStdin } from '../terminal/prompt.js';

interface AuthOptions {
  url?: string;
  apiKey?: string;
  verify: boolean;
  show?: boolean;
}

export function registerAuthCommand(program: Command): void {
  program
    .command('auth')
    .alias('login')
    .description('save the server URL and API key to ~/.config/aenv/credentials')
    .option('--url <url>', `server URL (default: ${DEFAULT_URL})`)
    .option('--api-key <key>', 'API key (prefer stdin or the prompt: flags end up in shell history)')
    .option('--no-verify', 'save without checking the key against the server')
    .option('--show', 'print the credentials in effect (key masked) and where they come from')
    .addHelpText(
      'after',
      `
On a terminal aenv asks for the URL and the key (hidden input). Scripts pass --url and pipe the
key on stdin. The file is written with mode 0600. AENV_URL and AENV_API_KEY override it.

Examples:
  aenv auth
  echo "$KEY" | aenv auth --url https://aenv.example.com
  aenv auth --show`,
    )
    .action(async (opts: AuthOptions, cmd: Command) => {
      const ctx = contextOf(cmd);
      const file = credentialsPath();
      if (opts.show) {
        const c = await resolveCredentials();
        const shown = {
          url: c.url,
          apiKey: maskKey(c.apiKey),
          source: c.source === 'env' ? 'environment' : file,
        };
        ctx.out.result(shown, `URL:     ${shown.url}\nAPI key: ${shown.apiKey}\nSource:  ${shown.source}`);
        return;
      }
      const stored = await readCredentialsFile(file);
      const interactive = Boolean(process.stdin.isTTY);
      let url = opts.url;
      if (!url) {
        const def = process.env.AENV_URL || stored?.url || DEFAULT_URL;
        url = interactive ? await ask('AgentENV server URL', def) : def;
      }
      url = normalizeUrl(url);
      let apiKey = opts.apiKey;
      if (!apiKey) {
        apiKey = interactive
          ? await askHidden('API key')
          : (await readStdin())
              .split(/\r?\n/)
              .find((l) => l.trim())
              ?.trim();
      }
      if (!apiKey)
        throw new UsageError(
          'no API key given',
          'Type it at the prompt, pipe it on stdin or pass --api-key.',
        );
      apiKey = apiKey.trim();

      if (opts.verify) {
        const api = new ApiClient({ url, apiKey, source: 'file' });
        try {
          await api.request('GET', '/v2/sandboxes', { query: { limit: 1 } });
        } catch (err) {
          if (err instanceof CliError)
            throw new CliError(
              `credentials not saved: ${err.message}`,
              1,
              'Use --no-verify to save them anyway.',
            );
          throw err;
        }
      }
      await writeCredentialsFile({ url, apiKey }, file);
      if (process.env.AENV_API_KEY || process.env.AENV_URL)
        ctx.out.note('Note: AENV_URL / AENV_API_KEY are set and override the saved credentials.');
      ctx.out.result({ url, credentialsFile: file }, `Saved credentials for ${url} to ${file}`);
    });
}
