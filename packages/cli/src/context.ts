import type { Command } from 'commander';
import { ApiClient } from './client/api.js';
import { resolveCredentials } from './config/credentials.js';
import { Output, resolveFormat } from './output/output.js';

/** What every command action needs: the output writer and (lazily) the API client. */
export interface Context {
  out: Output;
  api(): Promise<ApiClient>;
}

/** Builds the context from the global options (`--output`) of the running command. */
export function contextOf(cmd: Command): Context {
  const opts = cmd.optsWithGlobals<{ output?: string }>();
  const out = new Output(resolveFormat(opts.output, Boolean(process.stdout.isTTY)));
  let client: Promise<ApiClient> | undefined;
  return {
    out,
    api: () => (client ??= resolveCredentials().then((c) => new ApiClient(c))),
  };
}

/** Commander passes `(...args, options, command)`: the command is always last. */
export function commandOf(args: unknown[]): Command {
  return args[args.length - 1] as Command;
}
