import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { SystemGroup, SystemUser, UserDatabase } from '../users.js';
import type { SudoRequest } from './protocol.js';

/** Members of these groups may use sudo (Debian's `sudo`, Red Hat's and Alpine's `wheel`). */
export const SUDO_GROUPS = ['sudo', 'wheel'];

/**
 * True when a sudoers text has a rule granting `user` every command: `<who> <host>=[(ALL[:…])]
 * [TAG: …] ALL`, where <who> lists the user's name, `#uid`, `%group`, `%#gid` or ALL. Aliases,
 * Defaults, negations and command lists are not interpreted (they never grant here).
 */
export function sudoersGrantsAll(text: string, user: SystemUser, groups: readonly SystemGroup[]): boolean {
  const logical = text.replace(/\\\n/g, ' ').split('\n');
  for (const raw of logical) {
    // `#` starts a comment, except `#<uid>`.
    const line = raw.replace(/(^|\s)#(?!\d).*$/, '').trim();
    const eq = line.indexOf('=');
    if (eq < 0) continue;
    const lhs = line.slice(0, eq).trim().split(/\s+/);
    if (lhs.length < 2 || /^Defaults|_Alias$/.test(lhs[0]!)) continue;
    const who = lhs.slice(0, -1).join('').split(',').filter(Boolean);
    const spec = /^(?:\(\s*([^)]*)\)\s*)?(?:[A-Z_]+\s*:\s*)*ALL$/.exec(line.slice(eq + 1).trim());
    if (!spec) continue;
    // A Runas list other than ALL limits the target users; only ALL (or none: root) is taken.
    const runas = spec[1]?.split(':')[0]?.trim();
    if (runas !== undefined && runas !== 'ALL') continue;
    const matches = (w: string): boolean =>
      w === 'ALL' ||
      w === user.name ||
      w === `#${user.uid}` ||
      groups.some((g) => w === `%${g.name}` || w === `%#${g.gid}`);
    if (who.some(matches)) return true;
  }
  return false;
}

/** /etc/sudoers and the files sudo would read from /etc/sudoers.d (no `.` in the name, no `~`). */
export function readSudoers(etcDir: string): string[] {
  const texts: string[] = [];
  const read = (file: string) => {
    try {
      texts.push(readFileSync(file, 'utf8'));
    } catch {
      // absent or unreadable: grants nothing
    }
  };
  read(path.join(etcDir, 'sudoers'));
  let names: string[] = [];
  try {
    names = readdirSync(path.join(etcDir, 'sudoers.d'));
  } catch {
    // no sudoers.d
  }
  for (const n of names.sort())
    if (!n.includes('.') && !n.endsWith('~')) read(path.join(etcDir, 'sudoers.d', n));
  return texts;
}

/** Whether `user` may run anything as anyone: root, a member of a sudo group, or an ALL rule. */
export function maySudo(users: UserDatabase, user: SystemUser): boolean {
  if (user.uid === 0) return true;
  const groups = users.groupsOf(user);
  if (groups.some((g) => SUDO_GROUPS.includes(g.name))) return true;
  return readSudoers(users.root).some((text) => sudoersGrantsAll(text, user, groups));
}

/** Variables kept from the caller's environment when it is reset (sudo's env_keep and env_check). */
const KEEP = new Set([
  'COLORS',
  'COLORTERM',
  'DISPLAY',
  'HOSTNAME',
  'KRB5CCNAME',
  'LANG',
  'LANGUAGE',
  'LINGUAS',
  'LS_COLORS',
  'PS1',
  'PS2',
  'TERM',
  'TZ',
  'XAUTHORITY',
  'XAUTHORIZATION',
  'XDG_CURRENT_DESKTOP',
]);

/** Variables sudo removes even from a preserved environment (its env_delete list). */
const DELETE = new Set([
  'BASHOPTS',
  'BASH_ENV',
  'CDPATH',
  'ENV',
  'FPATH',
  'GLOBIGNORE',
  'HOSTALIASES',
  'IFS',
  'JAVA_TOOL_OPTIONS',
  'LOCALDOMAIN',
  'NLSPATH',
  'NULLCMD',
  'PATH_LOCALE',
  'PERL5DB',
  'PERL5LIB',
  'PERL5OPT',
  'PERLIO_DEBUG',
  'PERLLIB',
  'PS4',
  'PYTHONHOME',
  'PYTHONINSPECT',
  'PYTHONPATH',
  'PYTHONUSERBASE',
  'READNULLCMD',
  'RES_OPTIONS',
  'RUBYLIB',
  'RUBYOPT',
  'SHELLOPTS',
  'TERMCAP',
  'TERMINFO',
  'TERMINFO_DIRS',
  'TERMPATH',
  'TMPPREFIX',
  'ZDOTDIR',
]);

const deleted = (name: string, value: string): boolean =>
  DELETE.has(name) || name.startsWith('LD_') || name.startsWith('BASH_FUNC_') || value.startsWith('() ');

export interface EnvInput {
  request: Pick<SudoRequest, 'env' | 'login' | 'setHome' | 'preserveEnv' | 'assignments'>;
  caller: SystemUser;
  target: SystemUser;
  /** sudo's secure_path: the sandbox's PATH, else the default. */
  securePath: string;
  /** SUDO_COMMAND: the command's path and arguments. */
  command: string;
}

/**
 * The variables the command gets on top of envd's process environment for the target user
 * (processEnv), following sudoers' defaults: the caller's environment is reset to a few kept
 * variables (all of it, less the unsafe ones, with -E; only the listed ones added with
 * --preserve-env=list), HOME/USER/LOGNAME/SHELL/MAIL are the target's (HOME stays the caller's
 * with -E unless -H; SHELL too), PATH is the secure path, plus SUDO_USER/UID/GID/COMMAND and
 * the VAR=value assignments.
 */
export function commandEnv(input: EnvInput): Record<string, string> {
  const { request, caller, target } = input;
  const callerEnv = request.env;
  const preserveAll = !request.login && request.preserveEnv === true;
  const extra = new Set(Array.isArray(request.preserveEnv) ? request.preserveEnv : []);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(callerEnv)) {
    if (typeof v !== 'string') continue;
    if (extra.has(k) || (preserveAll ? !deleted(k, v) : KEEP.has(k) || k.startsWith('LC_'))) env[k] = v;
  }
  const keepHome = preserveAll && !request.setHome && callerEnv.HOME !== undefined;
  Object.assign(env, {
    HOME: keepHome ? callerEnv.HOME! : target.home,
    USER: target.name,
    LOGNAME: target.name,
    SHELL: preserveAll && callerEnv.SHELL ? callerEnv.SHELL : target.shell,
    MAIL: `/var/mail/${target.name}`,
    PATH: input.securePath,
    SUDO_COMMAND: input.command,
    SUDO_USER: caller.name,
    SUDO_UID: String(caller.uid),
    SUDO_GID: String(caller.gid),
  });
  return { ...env, ...request.assignments };
}

/** sudo's quoting of a command for `shell -c` with -s/-i: a backslash before every character but [A-Za-z0-9_$-]. */
export function shellCommandLine(argv: readonly string[]): string {
  return argv.map((a) => a.replace(/[^A-Za-z0-9_$-]/g, '\\$&')).join(' ');
}

export interface CommandPlan {
  /** The program, as given or the shell; resolved in PATH by the caller. */
  file: string;
  args: string[];
}

/**
 * What to execute: the command itself; with -s the caller's shell ($SHELL, else its passwd
 * shell), with -i the target's shell as a login shell (`-l`); a command after -s/-i is passed to
 * the shell's -c, quoted like sudo does.
 */
export function commandPlan(
  request: Pick<SudoRequest, 'argv' | 'login' | 'shell' | 'env'>,
  caller: SystemUser,
  target: SystemUser,
): CommandPlan {
  const withCommand = request.argv.length ? ['-c', shellCommandLine(request.argv)] : [];
  if (request.login) return { file: target.shell || '/bin/sh', args: ['-l', ...withCommand] };
  if (request.shell) return { file: request.env.SHELL || caller.shell || '/bin/sh', args: withCommand };
  return { file: request.argv[0]!, args: request.argv.slice(1) };
}
