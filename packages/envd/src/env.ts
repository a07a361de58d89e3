import type { SystemUser } from './users.js';

export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * The environment of a process started by envd, lowest precedence first: a base (PATH, HOME,
 * USER, LOGNAME, SHELL), the sandbox-wide variables from /init (E2B_SANDBOX*, create-time envVars),
 * then the request's own variables. The result is a fresh object, so request variables never leak
 * into the sandbox-wide set.
 */
export function processEnv(
  user: SystemUser,
  sandboxVars: Readonly<Record<string, string>>,
  requestVars: Readonly<Record<string, string>>,
): Record<string, string> {
  return {
    PATH: DEFAULT_PATH,
    HOME: user.home,
    USER: user.name,
    LOGNAME: user.name,
    SHELL: user.shell,
    ...sandboxVars,
    ...requestVars,
  };
}
