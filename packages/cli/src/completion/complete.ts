import type { Command } from 'commander';

/** What kind of value a position takes, for dynamic candidates. */
export type ValueKind = 'sandbox' | 'template' | 'path' | 'none' | { choices: string[] };

/** The part of a command tree completion needs, taken from commander. */
export interface CommandSpec {
  names: string[];
  options: { flags: string[]; takesValue: boolean; kind: ValueKind }[];
  args: { kind: ValueKind; variadic: boolean }[];
  subcommands: CommandSpec[];
}

/** Argument names that mean "a sandbox id", "a template", "a local path". */
function kindOfName(name: string): ValueKind {
  if (name === 'id' || name === 'ids' || name === 'sandbox-id' || name === 'sandboxId') return 'sandbox';
  if (name === 'template') return 'template';
  if (name === 'local' || name === 'dockerfile' || name === 'dir' || name === 'context') return 'path';
  return 'none';
}

/** Reads the completion spec off a commander program (hidden commands left out). */
export function specOf(cmd: Command): CommandSpec {
  return {
    names: [cmd.name(), ...cmd.aliases()],
    options: cmd.options
      .filter((o) => !o.hidden)
      .map((o) => ({
        flags: [o.long, o.short].filter((f): f is string => Boolean(f)),
        takesValue: o.required || o.optional,
        kind: o.argChoices ? { choices: o.argChoices } : kindOfName(o.attributeName()),
      })),
    args: cmd.registeredArguments.map((a) => ({
      kind: a.argChoices ? { choices: a.argChoices } : kindOfName(a.name()),
      variadic: a.variadic,
    })),
    // Commander keeps `hidden: true` of `.command(name, { hidden })` in a private field.
    subcommands: cmd.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden).map(specOf),
  };
}

export type Completion = { words: string[] } | { kind: 'sandbox' | 'template' | 'path' };

/**
 * Candidates for the last word of `words` (the words after the program name, the last one being
 * the word under the cursor, possibly empty). Static candidates are returned as words; the
 * caller resolves dynamic kinds (sandbox ids from the API, paths from the shell).
 */
export function complete(root: CommandSpec, words: string[]): Completion {
  const current = words[words.length - 1] ?? '';
  const done = words.slice(0, -1);
  let cmd = root;
  let positional = 0;
  let afterDashes = false;
  let pendingValue: ValueKind | undefined;
  const global = root.options;

  for (const w of done) {
    if (pendingValue !== undefined) {
      pendingValue = undefined;
      continue;
    }
    if (afterDashes) {
      positional++;
      continue;
    }
    if (w === '--') {
      afterDashes = true;
      continue;
    }
    if (w.startsWith('-') && w.length > 1) {
      const flag = w.split('=')[0]!;
      const opt = [...cmd.options, ...global].find((o) => o.flags.includes(flag));
      if (opt?.takesValue && !w.includes('=')) pendingValue = opt.kind;
      continue;
    }
    const sub = positional === 0 ? cmd.subcommands.find((c) => c.names.includes(w)) : undefined;
    if (sub) {
      cmd = sub;
      continue;
    }
    positional++;
  }

  const resolve = (kind: ValueKind): Completion => {
    if (kind === 'none') return { words: [] };
    if (typeof kind === 'object') return { words: kind.choices };
    return { kind };
  };
  if (pendingValue !== undefined) return resolve(pendingValue);
  if (!afterDashes && current.startsWith('-')) {
    return {
      words: [...cmd.options, ...(cmd === root ? [] : global)]
        .flatMap((o) => o.flags)
        .filter((f) => f.startsWith('--'))
        .concat(['--help']),
    };
  }
  if (afterDashes && positional >= cmd.args.length - 1 && cmd.args[cmd.args.length - 1]?.variadic)
    return { words: [] };
  if (positional === 0 && cmd.subcommands.length) return { words: cmd.subcommands.flatMap((c) => c.names) };
  const last = cmd.args[cmd.args.length - 1];
  const arg = cmd.args[positional] ?? (last?.variadic ? last : undefined);
  return arg ? resolve(arg.kind) : { words: [] };
}
