import path from 'node:path';
import { invalidArgument } from './errors.js';

/**
 * Resolves a client path the way E2B's envd does: empty → the default workdir (if any), `~` and
 * `~/x` → the user's home, relative → under the user's home. `~other` is refused. The result is
 * absolute and normalised; envd runs as root inside its sandbox, so it is the sandbox's isolation,
 * not this function, that confines what a path can reach.
 */
export function resolveUserPath(p: string, home: string, defaultWorkdir?: string): string {
  if (p.includes('\0')) throw invalidArgument('path contains a NUL byte');
  let target = p === '' && defaultWorkdir ? defaultWorkdir : p;
  if (target.startsWith('~')) {
    if (target.length > 1 && target[1] !== '/') {
      throw invalidArgument(`cannot expand user-specific home dir in '${p}'`);
    }
    target = path.join(home, target.slice(1));
  }
  return path.resolve(home, target);
}
