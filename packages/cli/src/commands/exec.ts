import type { Command } from 'commander';
import { contextOf } from '../context.js';
import { collect, commandLine, parseKeyValues, parseSeconds } from '../lib/args.js';
import type { ExecOptions } from '../remote/exec.js';

export function registerExecCommand(program: Command): void {
  program
    .command('exec')
    .description('run a command in a sandbox; its output streams here and aenv exits with its code')
    .argument('<id>', 'sandbox id')
    .argument('<cmd...>', 'the command (after --); one argument is a shell command line')
    .option('--cwd <dir>', 'working directory (default: the user home)')
    .option('-u, --user <user>', 'run as this user (default: the sandbox default user)')
    .option('-e, --env <KEY=VALUE>', 'environment variable (repeatable)', collect)
    .option('-t, --timeout <secs>', 'kill the command after this long (exit code 124; seconds or 5m, 1h)')
    .option('-i, --stdin', 'forward stdin even when it is a terminal (it is when piped)')
    .option('--no-stdin', 'do not forward stdin')
    .addHelpText(
      'after',
      `
The command runs under 'bash -l -c'. A single argument is a command line (pipes, globs and
$VARS work); several arguments are quoted one by one, like an argv. stdout and stderr stay
separate; piped stdin is forwarded and closed at its end.

Examples:
  aenv exec i2k3lf0q8w7x1c9m4n5b -- uname -a
  aenv exec i2k3lf0q8w7x1c9m4n5b -- 'ls /etc | wc -l'
  echo hi | aenv exec i2k3lf0q8w7x1c9m4n5b -- cat
  aenv exec i2k3lf0q8w7x1c9m4n5b -u root --cwd / -e DEBUG=1 -- ./run.sh || echo "failed: $?"`,
    )
    .action(
      async (
        id: string,
        argv: string[],
        opts: { cwd?: string; user?: string; env?: string[]; timeout?: string; stdin?: boolean },
        cmd: Command,
      ) => {
        const ctx = contextOf(cmd);
        const line = commandLine(argv);
        const execOpts: ExecOptions = {
          envs: parseKeyValues(opts.env, '--env'),
          stdin: opts.stdin === undefined ? !process.stdin.isTTY : opts.stdin,
          ...(opts.cwd ? { cwd: opts.cwd } : {}),
          ...(opts.user ? { user: opts.user } : {}),
          ...(opts.timeout ? { timeout: parseSeconds(opts.timeout, '--timeout') } : {}),
        };
        // Loaded only now: the Connect client is most of the CLI's start, and most commands never use it.
        const [{ runningSandbox }, { execRemote }] = await Promise.all([
          import('../client/envd.js'),
          import('../remote/exec.js'),
        ]);
        const target = await runningSandbox(await ctx.api(), id);
        process.exitCode = await execRemote(target, line, execOpts);
      },
    );
}
