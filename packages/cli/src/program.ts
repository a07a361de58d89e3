import { Command, Option } from 'commander';
import { registerAuthCommand } from './commands/auth.js';
import { registerCompletionCommands } from './commands/completion.js';
import { registerExecCommand } from './commands/exec.js';
import { registerFileCommands } from './commands/files.js';
import { registerForkCommand } from './commands/fork.js';
import { registerNodeCommands } from './commands/nodes.js';
import { registerSandboxCommands } from './commands/sandboxes.js';
import { registerShellCommands } from './commands/shell.js';
import { registerSnapshotCommands } from './commands/snapshot.js';
import { registerTemplateCommands } from './commands/templates.js';
import { VERSION } from './version.js';

/** The whole `aenv` command tree (also read by shell completion). */
export function buildProgram(): Command {
  const program = new Command('aenv')
    .description('AgentENV command line: sandboxes, shells, files, templates and snapshots')
    .version(VERSION, '-v, --version', 'print the aenv version')
    .addOption(
      new Option(
        '-o, --output <format>',
        'output format (default: table on a terminal, json when piped)',
      ).choices(['table', 'json']),
    )
    .showSuggestionAfterError(true)
    // Throw instead of exiting, in every subcommand (settings are copied when commands are added),
    // so main() maps usage errors to exit code 2.
    .exitOverride()
    .configureHelp({ sortSubcommands: false, showGlobalOptions: true })
    .addHelpText(
      'after',
      `
Credentials come from \`aenv auth\` (~/.config/aenv/credentials) or AENV_URL / AENV_API_KEY.

Examples:
  aenv auth                                   # save server URL and API key
  aenv start                                  # shell in a new 'base' sandbox
  aenv ls                                     # running and paused sandboxes
  aenv exec <id> -- python3 -c 'print(42)'    # run a command, exit with its code
  aenv upload <id> ./src /home/user/          # copy a directory in
  aenv fork <id> --count 4                    # clone a running sandbox`,
    );

  registerAuthCommand(program);
  registerTemplateCommands(program);
  registerShellCommands(program);
  registerExecCommand(program);
  registerSandboxCommands(program);
  registerForkCommand(program);
  registerSnapshotCommands(program);
  registerFileCommands(program);
  registerNodeCommands(program);
  registerCompletionCommands(program);
  return program;
}
