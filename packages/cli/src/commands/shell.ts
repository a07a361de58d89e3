import type { Command } from 'commander';
import type { ApiClient } from '../client/api.js';
import type { Sandbox } from '../client/types.js';
import { contextOf, type Context } from '../context.js';
import { collect, parseKeyValues, parseSeconds } from '../lib/args.js';

/** Sets the process exit code to the shell's, so `aenv connect ...; echo $?` shows it. */
async function runShell(
  ctx: Context,
  api: ApiClient,
  sbx: Sandbox,
  opts: { user?: string; cwd?: string },
): Promise<number> {
  // Loaded only now, like exec's (see commands/exec.ts).
  const [{ targetOf }, { attachShell }] = await Promise.all([
    import('../client/envd.js'),
    import('../terminal/shell.js'),
  ]);
  const code = await attachShell(targetOf(api, sbx), {
    ...(opts.user ? { user: opts.user } : {}),
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
  });
  ctx.out.note(`Shell in ${sbx.sandboxID} exited with code ${code}.`);
  return code;
}

// eslint-disable-next-line max-lines-per-function -- declarative: one command definition after another
export function registerShellCommands(program: Command): void {
  program
    .command('start')
    .alias('create')
    .description('start a sandbox from a template and attach an interactive shell')
    .argument('[template]', 'template name or id, or a snapshot id', 'base')
    .option('-t, --timeout <secs>', 'lifetime in seconds (or 5m, 1h) before it is paused', '300')
    .option('--secure', 'require the access token for every data-plane call')
    .option('-d, --detach', 'only start it: print the sandbox and exit')
    .option('--keep', 'keep the sandbox running after the shell exits (default: kill it)')
    .option('-m, --metadata <key=value>', 'metadata to attach (repeatable)', collect)
    .option('-e, --env <KEY=VALUE>', 'environment variable for every process (repeatable)', collect)
    .option('-u, --user <user>', 'user of the shell (default: the sandbox default user)')
    .option('--cwd <dir>', 'working directory of the shell')
    .addHelpText(
      'after',
      `
Without --detach the shell is attached at once; leaving it (exit or Ctrl-D) kills the sandbox
unless --keep is given. With --detach the sandbox keeps running for --timeout seconds.

Examples:
  aenv start                        # a shell in a fresh 'base' sandbox
  aenv start base --keep -t 1h      # keep it after the shell exits
  ID=$(aenv start base -d -o json | jq -r .sandboxID)`,
    )
    .action(
      async (
        template: string,
        opts: {
          timeout: string;
          secure: boolean;
          detach: boolean;
          keep: boolean;
          metadata?: string[];
          env?: string[];
          user?: string;
          cwd?: string;
        },
        cmd: Command,
      ) => {
        const ctx = contextOf(cmd);
        const body = {
          templateID: template,
          timeout: parseSeconds(opts.timeout, '--timeout'),
          metadata: parseKeyValues(opts.metadata, '--metadata'),
          envVars: parseKeyValues(opts.env, '--env'),
          ...(opts.secure ? { secure: true } : {}),
        };
        const api = await ctx.api();
        const sbx = (await api.post<Sandbox>('/v2/sandboxes', body)).data;
        if (opts.detach) {
          ctx.out.result(sbx, `Started sandbox ${sbx.sandboxID} (template ${template})`);
          return;
        }
        ctx.out.note(`Started sandbox ${sbx.sandboxID} (template ${template}).`);
        const kill = async () => {
          if (opts.keep)
            ctx.out.note(`Sandbox ${sbx.sandboxID} keeps running: aenv connect ${sbx.sandboxID}`);
          else {
            await api.delete(`/sandboxes/${encodeURIComponent(sbx.sandboxID)}`);
            ctx.out.note(`Killed sandbox ${sbx.sandboxID}.`);
          }
        };
        let code: number;
        try {
          code = await runShell(ctx, api, sbx, opts);
        } catch (err) {
          // No usable shell: do not leave an unused sandbox behind (unless asked to keep it).
          await kill().catch(() => undefined);
          throw err;
        }
        await kill();
        process.exitCode = code;
      },
    );

  program
    .command('connect')
    .alias('cn')
    .description('attach an interactive shell to a sandbox (resuming it if paused)')
    .argument('<id>', 'sandbox id')
    .option('-t, --timeout <secs>', 'keep it running at least this long (seconds or 5m, 1h)')
    .option('-u, --user <user>', 'user of the shell (default: the sandbox default user)')
    .option('--cwd <dir>', 'working directory of the shell')
    .addHelpText(
      'after',
      `
The shell is a login bash on a terminal of your window's size; resizing follows, Ctrl-C goes to
the remote program, Ctrl-D or 'exit' leaves. aenv exits with the shell's exit code; the sandbox
keeps running.

Examples:
  aenv connect i2k3lf0q8w7x1c9m4n5b
  aenv cn i2k3lf0q8w7x1c9m4n5b -u root --cwd /`,
    )
    .action(async (id: string, opts: { timeout?: string; user?: string; cwd?: string }, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      const body = opts.timeout ? { timeout: parseSeconds(opts.timeout, '--timeout') } : {};
      const res = await api.post<Sandbox>(`/sandboxes/${encodeURIComponent(id)}/connect`, body);
      if (res.status === 201) ctx.out.note(`Resumed sandbox ${id}.`);
      process.exitCode = await runShell(ctx, api, res.data, opts);
    });
}
