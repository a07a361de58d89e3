import type { Command } from 'commander';
import { contextOf } from '../context.js';

export function registerFileCommands(program: Command): void {
  program
    .command('upload')
    .alias('up')
    .description('copy a local file or directory (recursively) into a sandbox')
    .argument('<id>', 'sandbox id')
    .argument('<local>', 'local file or directory')
    .argument('<remote>', 'destination path in the sandbox (relative paths start in the user home)')
    .option('-u, --user <user>', 'owner of the written files (default: the sandbox default user)')
    .addHelpText(
      'after',
      `
Like cp -r: onto an existing directory (or a path ending in /) the source is copied inside it
under its own name, otherwise it takes the destination's name. Parent directories are created.
Symlinks to files are followed; symlinks to directories are skipped. A progress bar shows on a
terminal.

Examples:
  aenv upload i2k3lf0q8w7x1c9m4n5b ./data.csv /home/user/data.csv
  aenv upload i2k3lf0q8w7x1c9m4n5b ./src /home/user/          # -> /home/user/src
  aenv upload i2k3lf0q8w7x1c9m4n5b ./src project              # -> /home/user/project`,
    )
    .action(async (id: string, local: string, remote: string, opts: { user?: string }, cmd: Command) => {
      // Loaded only now, like exec's (see commands/exec.ts).
      const { upload } = await import('../remote/transfer.js');
      await upload(contextOf(cmd), id, local, remote, opts);
    });

  program
    .command('download')
    .alias('down')
    .description('copy a file or directory (recursively) out of a sandbox')
    .argument('<id>', 'sandbox id')
    .argument('<remote>', 'file or directory in the sandbox (relative paths start in the user home)')
    .argument('[local]', 'local destination (default: the current directory)')
    .option('-u, --user <user>', 'read as this user (default: the sandbox default user)')
    .addHelpText(
      'after',
      `
Like cp -r: into an existing directory the source lands under its own name. Every file is
written to a temporary name and renamed into place; permission bits are kept. Symlinks to files
are downloaded as files, symlinks to directories skipped.

Examples:
  aenv download i2k3lf0q8w7x1c9m4n5b /home/user/out.json
  aenv download i2k3lf0q8w7x1c9m4n5b /home/user/results ./results-7`,
    )
    .action(
      async (
        id: string,
        remote: string,
        local: string | undefined,
        opts: { user?: string },
        cmd: Command,
      ) => {
        // Loaded only now, like exec's (see commands/exec.ts).
        const { download } = await import('../remote/transfer.js');
        await download(contextOf(cmd), id, remote, local, opts);
      },
    );
}
