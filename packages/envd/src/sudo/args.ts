import type { SudoAction, SudoRequest } from './protocol.js';

/** The sudo release whose command line this client follows (Debian 12's). */
export const SUDO_COMPAT_VERSION = '1.9.13p3';

export const USAGE = `usage: sudo -h | -K | -k | -V
usage: sudo -v [-ABkNnS] [-g group] [-h host] [-p prompt] [-u user]
usage: sudo -l [-ABkNnS] [-g group] [-h host] [-p prompt] [-U user]
            [-u user] [command [arg ...]]
usage: sudo [-ABbEHkNnPS] [-r role] [-t type] [-C num] [-D directory]
            [-g group] [-h host] [-p prompt] [-R directory] [-T timeout]
            [-u user] [VAR=value] [-i | -s] [command [arg ...]]
usage: sudo -e [-ABkNnS] [-r role] [-t type] [-C num] [-D directory]
            [-g group] [-h host] [-p prompt] [-R directory] [-T timeout]
            [-u user] file ...`;

export const HELP = `sudo - execute a command as another user (AgentENV: run by envd, the sandbox daemon)

${USAGE}

Options:
  -A, --askpass                 ignored (no password is ever asked)
  -C, --close-from=num          ignored
  -D, --chdir=directory         change the working directory before running command
  -E, --preserve-env            preserve user environment when running command
      --preserve-env=list       preserve specific environment variables
  -g, --group=group             run command as the specified group name or ID
  -H, --set-home                set HOME variable to target user's home dir
  -h, --help                    display help message and exit
  -i, --login                   run login shell as the target user; a command may also be specified
  -K, --remove-timestamp        does nothing (there are no credentials to cache)
  -k, --reset-timestamp         does nothing (there are no credentials to cache)
  -l, --list                    list user's privileges or check a specific command
  -n, --non-interactive         non-interactive mode, no prompts are used (always the case)
  -P, --preserve-groups         ignored
  -p, --prompt=prompt           ignored
  -S, --stdin                   ignored (no password is read)
  -s, --shell                   run shell as the target user; a command may also be specified
  -U, --other-user=user         in list mode, display privileges for user
  -u, --user=user               run command (or edit file) as specified user name or ID
  -V, --version                 display version information and exit
  -v, --validate                check that the user may use sudo
  --                            stop processing command line arguments`;

/** What the command line asks envd for; the client adds its environment, directory and terminal. */
export type ParsedRequest = Omit<SudoRequest, 'env' | 'cwd' | 'tty'>;

/** What the client does, decided from its arguments alone. */
export type SudoInvocation =
  | { kind: 'help' }
  | { kind: 'version' }
  /** -k / -K without a command: nothing to do. */
  | { kind: 'noop' }
  /** Exit 1 with `message` (when set) and the usage text. */
  | { kind: 'usage'; message?: string }
  /** Exit 1 with `message` alone: an option of real sudo this one does not implement. */
  | { kind: 'error'; message: string }
  | { kind: 'request'; request: ParsedRequest };

interface OptionSpec {
  short?: string;
  long?: string;
  arg: boolean;
  /** Options of real sudo this one does not implement. */
  unsupported?: string;
}

const OPTIONS: OptionSpec[] = [
  { short: 'A', long: 'askpass', arg: false },
  { short: 'a', arg: true, unsupported: 'BSD authentication types' },
  { short: 'B', long: 'bell', arg: false },
  { short: 'b', long: 'background', arg: false, unsupported: 'running the command in the background' },
  { short: 'C', long: 'close-from', arg: true },
  { short: 'c', arg: true, unsupported: 'BSD login classes' },
  { short: 'D', long: 'chdir', arg: true },
  { short: 'E', arg: false },
  { long: 'preserve-env', arg: false },
  { short: 'e', long: 'edit', arg: false, unsupported: 'sudoedit' },
  { short: 'g', long: 'group', arg: true },
  { short: 'H', long: 'set-home', arg: false },
  { short: 'h', long: 'help', arg: false },
  { long: 'host', arg: true, unsupported: 'remote hosts' },
  { short: 'i', long: 'login', arg: false },
  { short: 'K', long: 'remove-timestamp', arg: false },
  { short: 'k', long: 'reset-timestamp', arg: false },
  { short: 'l', long: 'list', arg: false },
  { short: 'N', long: 'no-update', arg: false },
  { short: 'n', long: 'non-interactive', arg: false },
  { short: 'P', long: 'preserve-groups', arg: false },
  { short: 'p', long: 'prompt', arg: true },
  { short: 'R', long: 'chroot', arg: true, unsupported: 'chroot' },
  { short: 'r', long: 'role', arg: true, unsupported: 'SELinux roles' },
  { short: 'S', long: 'stdin', arg: false },
  { short: 's', long: 'shell', arg: false },
  { short: 'T', long: 'command-timeout', arg: true, unsupported: 'command timeouts' },
  { short: 't', long: 'type', arg: true, unsupported: 'SELinux types' },
  { short: 'U', long: 'other-user', arg: true },
  { short: 'u', long: 'user', arg: true },
  { short: 'V', long: 'version', arg: false },
  { short: 'v', long: 'validate', arg: false },
];

const BY_SHORT = new Map(OPTIONS.filter((o) => o.short).map((o) => [o.short!, o]));
const BY_LONG = new Map(OPTIONS.filter((o) => o.long).map((o) => [o.long!, o]));

/** A malformed command line: answered with the usage text. */
class UsageError extends Error {}
/** An option of real sudo this one does not implement: answered with the message alone. */
class UnsupportedOptionError extends Error {}

/** Splits `--preserve-env=A,B` lists; empty names are dropped. */
function envList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The options given, keyed by their short name (their long one when they have none). */
class GivenOptions {
  private readonly values = new Map<string, string | true>();
  /** -E or a bare --preserve-env. */
  private preserveAll = false;
  /** The names of every --preserve-env=list. */
  private readonly preserve: string[] = [];

  set(opt: OptionSpec, value: string | true): void {
    if (opt.unsupported) {
      throw new UnsupportedOptionError(
        `${opt.unsupported} (-${opt.short ?? '-' + opt.long}) is not supported in this sandbox`,
      );
    }
    const key = opt.short ?? opt.long!;
    if (key === 'E') this.preserveAll = true;
    else if (key === 'preserve-env') {
      if (value === true) this.preserveAll = true;
      else this.preserve.push(...envList(value));
    }
    this.values.set(key, value);
  }

  has(key: string): boolean {
    return this.values.has(key);
  }

  value(key: string): string | undefined {
    return this.values.get(key) as string | undefined;
  }

  /** What -E and --preserve-env ask for: everything, the names listed, or nothing. */
  preservedEnv(): true | string[] | undefined {
    if (this.preserveAll) return true;
    return this.preserve.length ? this.preserve : undefined;
  }
}

/** Reads the long option at argv[i]; returns the index of the last argument it used. */
function readLong(argv: readonly string[], i: number, given: GivenOptions): number {
  const a = argv[i]!;
  const eq = a.indexOf('=');
  const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
  const opt = BY_LONG.get(name);
  if (!opt) throw new UsageError(`unrecognized option '${a}'`);
  const attached = eq < 0 ? undefined : a.slice(eq + 1);
  // Its argument is optional: a bare --preserve-env preserves everything.
  if (name === 'preserve-env') {
    given.set(opt, attached ?? true);
  } else if (!opt.arg) {
    if (attached !== undefined) throw new UsageError(`option '--${name}' doesn't allow an argument`);
    given.set(opt, true);
  } else if (attached !== undefined) {
    given.set(opt, attached);
  } else if (i + 1 < argv.length) {
    given.set(opt, argv[++i]!);
  } else {
    throw new UsageError(`option '--${name}' requires an argument`);
  }
  return i;
}

/**
 * Reads the cluster of short options at argv[i] (`-nEu bob`); an option taking an argument takes
 * the rest of the cluster, or else the next argument. Returns the index of the last argument used.
 */
function readShortCluster(argv: readonly string[], i: number, given: GivenOptions): number {
  const a = argv[i]!;
  for (let j = 1; j < a.length; j++) {
    const c = a[j]!;
    const opt = BY_SHORT.get(c);
    if (!opt) throw new UsageError(`invalid option -- '${c}'`);
    if (!opt.arg) {
      given.set(opt, true);
    } else if (j + 1 < a.length) {
      given.set(opt, a.slice(j + 1));
      break;
    } else if (i + 1 < argv.length) {
      given.set(opt, argv[++i]!);
      break;
    } else {
      throw new UsageError(`option requires an argument -- '${c}'`);
    }
  }
  return i;
}

/**
 * Reads options the way getopt_long with "+" does: they stop at the first operand or `--`.
 * Returns the index of the first argument after them.
 */
function readOptions(argv: readonly string[], given: GivenOptions): number {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') return i + 1;
    if (a.startsWith('--')) i = readLong(argv, i, given);
    else if (a.startsWith('-') && a !== '-') i = readShortCluster(argv, i, given);
    else return i;
  }
  return argv.length;
}

/** The VAR=value arguments from argv[start], and the index of the command after them. */
function readAssignments(
  argv: readonly string[],
  start: number,
): { assignments: Record<string, string>; next: number } {
  const assignments: Record<string, string> = {};
  let i = start;
  for (; i < argv.length && /^[^=]+=/.test(argv[i]!); i++) {
    const a = argv[i]!;
    const eq = a.indexOf('=');
    assignments[a.slice(0, eq)] = a.slice(eq + 1);
  }
  return { assignments, next: i };
}

/** Decides what the options and the command ask for, refusing the combinations sudo refuses. */
function invocationOf(
  given: GivenOptions,
  assignments: Record<string, string>,
  command: string[],
): SudoInvocation {
  if (given.has('h')) return { kind: 'help' };
  if (given.has('V')) return { kind: 'version' };
  const login = given.has('i');
  const shell = given.has('s');
  if (login && shell) return { kind: 'usage', message: 'you may not specify both the -i and -s options' };
  if (login && given.preservedEnv()) {
    return { kind: 'usage', message: 'you may not specify both the -i and -E options' };
  }
  const list = given.has('l');
  if (given.has('U') && !list)
    return { kind: 'usage', message: 'the -U option may only be used with the -l option' };

  const action = list ? 'list' : given.has('v') ? 'validate' : 'run';
  if (action === 'run' && command.length === 0 && !login && !shell) {
    if (given.has('k') || given.has('K')) return { kind: 'noop' };
    return { kind: 'usage' };
  }
  if (given.has('K') && command.length > 0) {
    return { kind: 'usage', message: 'the -K option may not be used with a command' };
  }
  return { kind: 'request', request: requestOf(given, action, assignments, command) };
}

/** The request to envd, with only the fields the options set. */
function requestOf(
  given: GivenOptions,
  action: SudoAction,
  assignments: Record<string, string>,
  command: string[],
): ParsedRequest {
  const preserveEnv = given.preservedEnv();
  return {
    action,
    argv: command,
    ...(given.has('u') ? { user: given.value('u') } : {}),
    ...(given.has('g') ? { group: given.value('g') } : {}),
    ...(given.has('i') ? { login: true } : {}),
    ...(given.has('s') ? { shell: true } : {}),
    ...(given.has('H') ? { setHome: true } : {}),
    ...(preserveEnv ? { preserveEnv } : {}),
    ...(Object.keys(assignments).length ? { assignments } : {}),
    ...(given.has('D') ? { chdir: given.value('D') } : {}),
    ...(given.has('U') ? { listUser: given.value('U') } : {}),
  };
}

/**
 * Parses sudo's command line the way sudo does (getopt_long with "+": options stop at the first
 * operand or `--`), then VAR=value assignments, then the command.
 */
export function parseSudoArgs(argv: readonly string[]): SudoInvocation {
  const given = new GivenOptions();
  let operands: number;
  try {
    operands = readOptions(argv, given);
  } catch (err) {
    if (err instanceof UsageError) return { kind: 'usage', message: err.message };
    if (err instanceof UnsupportedOptionError) return { kind: 'error', message: err.message };
    throw err;
  }
  const { assignments, next } = readAssignments(argv, operands);
  return invocationOf(given, assignments, argv.slice(next));
}
