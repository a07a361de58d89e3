import type { SudoRequest } from './protocol.js';

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
  | { kind: 'request'; request: Omit<SudoRequest, 'env' | 'cwd' | 'tty'> };

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

class UsageError extends Error {}

/** Splits `--preserve-env=A,B` lists; empty names are dropped. */
function envList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * Parses sudo's command line the way sudo does (getopt_long with "+": options stop at the first
 * operand or `--`), then VAR=value assignments, then the command.
 */
export function parseSudoArgs(argv: readonly string[]): SudoInvocation {
  const seen = new Map<string, string | true>();
  const preserve: string[] = [];
  let preserveAll = false;
  let i = 0;
  const set = (opt: OptionSpec, value: string | true): void => {
    if (opt.unsupported) {
      throw new Error(
        `${opt.unsupported} (-${opt.short ?? '-' + opt.long}) is not supported in this sandbox`,
      );
    }
    const key = opt.short ?? opt.long!;
    if (key === 'E') preserveAll = true;
    else if (key === 'preserve-env') {
      if (value === true) preserveAll = true;
      else preserve.push(...envList(value));
    }
    seen.set(key, value);
  };
  try {
    for (; i < argv.length; i++) {
      const a = argv[i]!;
      if (a === '--') {
        i++;
        break;
      }
      if (a.startsWith('--')) {
        const eq = a.indexOf('=');
        const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
        const opt = BY_LONG.get(name);
        if (!opt) throw new UsageError(`unrecognized option '${a}'`);
        if (name === 'preserve-env') {
          set(opt, eq < 0 ? true : a.slice(eq + 1));
        } else if (opt.arg) {
          if (eq >= 0) set(opt, a.slice(eq + 1));
          else if (i + 1 < argv.length) set(opt, argv[++i]!);
          else throw new UsageError(`option '--${name}' requires an argument`);
        } else {
          if (eq >= 0) throw new UsageError(`option '--${name}' doesn't allow an argument`);
          set(opt, true);
        }
        continue;
      }
      if (!a.startsWith('-') || a === '-') break;
      for (let j = 1; j < a.length; j++) {
        const c = a[j]!;
        const opt = BY_SHORT.get(c);
        if (!opt) throw new UsageError(`invalid option -- '${c}'`);
        if (!opt.arg) {
          set(opt, true);
          continue;
        }
        if (j + 1 < a.length) set(opt, a.slice(j + 1));
        else if (i + 1 < argv.length) set(opt, argv[++i]!);
        else throw new UsageError(`option requires an argument -- '${c}'`);
        break;
      }
    }
  } catch (err) {
    if (err instanceof UsageError) return { kind: 'usage', message: err.message };
    return { kind: 'error', message: (err as Error).message };
  }

  const assignments: Record<string, string> = {};
  for (; i < argv.length && /^[^=]+=/.test(argv[i]!); i++) {
    const a = argv[i]!;
    const eq = a.indexOf('=');
    assignments[a.slice(0, eq)] = a.slice(eq + 1);
  }
  const command = argv.slice(i);
  const has = (k: string) => seen.has(k);
  const value = (k: string) => seen.get(k) as string | undefined;

  if (has('h')) return { kind: 'help' };
  if (has('V')) return { kind: 'version' };
  const login = has('i');
  const shell = has('s');
  if (login && shell) return { kind: 'usage', message: 'you may not specify both the -i and -s options' };
  if (login && (preserveAll || preserve.length)) {
    return { kind: 'usage', message: 'you may not specify both the -i and -E options' };
  }
  const list = has('l');
  if (has('U') && !list)
    return { kind: 'usage', message: 'the -U option may only be used with the -l option' };

  const action = list ? 'list' : has('v') ? 'validate' : 'run';
  if (action === 'run' && command.length === 0 && !login && !shell) {
    if (has('k') || has('K')) return { kind: 'noop' };
    return { kind: 'usage' };
  }
  if (has('K') && command.length > 0) {
    return { kind: 'usage', message: 'the -K option may not be used with a command' };
  }
  return {
    kind: 'request',
    request: {
      action,
      argv: command,
      ...(has('u') ? { user: value('u') } : {}),
      ...(has('g') ? { group: value('g') } : {}),
      ...(login ? { login } : {}),
      ...(shell ? { shell } : {}),
      ...(has('H') ? { setHome: true } : {}),
      ...(preserveAll ? { preserveEnv: true } : preserve.length ? { preserveEnv: preserve } : {}),
      ...(Object.keys(assignments).length ? { assignments } : {}),
      ...(has('D') ? { chdir: value('D') } : {}),
      ...(has('U') ? { listUser: value('U') } : {}),
    },
  };
}
