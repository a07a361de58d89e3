import { Argument, type Command } from 'commander';
import type { ListedSandbox, Template } from '../client/types.js';
import { complete, specOf } from '../completion/complete.js';
import { completionScript, SHELLS, type Shell } from '../completion/scripts.js';
import { contextOf } from '../context.js';

/** Dynamic candidates must not make the shell hang: a slow or absent server yields nothing. */
const LOOKUP_TIMEOUT_MS = 3000;

export function registerCompletionCommands(program: Command): void {
  program
    .command('completion')
    .description('print the shell completion script (commands, options and sandbox ids)')
    .addArgument(new Argument('<shell>', 'the shell').choices(SHELLS))
    .addHelpText(
      'after',
      `
Examples:
  source <(aenv completion bash)                              # in ~/.bashrc
  source <(aenv completion zsh)                               # in ~/.zshrc, after compinit
  aenv completion fish > ~/.config/fish/completions/aenv.fish`,
    )
    .action((shell: Shell) => {
      process.stdout.write(completionScript(shell));
    });

  program
    .command('__complete', { hidden: true })
    .description('print completion candidates for the words after `aenv` (used by the scripts)')
    .argument('[words...]')
    .allowUnknownOption()
    .helpOption(false)
    .action(async (words: string[] = [], _opts: unknown, cmd: Command) => {
      const result = complete(specOf(program), words.length ? words : ['']);
      let candidates: string[] = [];
      if ('words' in result) candidates = result.words;
      else if (result.kind === 'sandbox' || result.kind === 'template') {
        try {
          const api = await contextOf(cmd).api();
          const signal = AbortSignal.timeout(LOOKUP_TIMEOUT_MS);
          if (result.kind === 'sandbox') {
            const rows = await api.get<ListedSandbox[]>('/v2/sandboxes', { query: { limit: 100 }, signal });
            candidates = rows.map((s) => s.sandboxID);
          } else {
            const rows = await api.get<Template[]>('/templates', { signal });
            candidates = rows.flatMap((t) => [...(t.names ?? t.aliases ?? []), t.templateID]);
          }
        } catch {
          candidates = result.kind === 'template' ? ['base'] : [];
        }
      }
      if (candidates.length) process.stdout.write(candidates.join('\n') + '\n');
    });
}
