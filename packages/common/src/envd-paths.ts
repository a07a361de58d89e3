import { DomainError } from './errors.js';
import type { SandboxRoute } from './sandbox-route.js';

/**
 * envd paths that belong to the node alone: /init sets the access token, the environment, the
 * default user and the time after which later inits are ignored. Sandbox traffic never reaches
 * them, whatever the sandbox's `secure`; the node calls envd at its own address, not through a
 * proxy.
 */
const NODE_ONLY = new Set(['/init']);

/**
 * The node-only envd path `path` names, as envd reads it (a WHATWG URL: dot segments resolved,
 * backslashes as slashes), also in other letter cases and with a trailing slash. A path that
 * cannot be read is refused as well.
 */
export function nodeOnlyEnvdPath(path: string): string | undefined {
  let pathname: string;
  try {
    pathname = new URL(path, 'http://envd').pathname;
  } catch {
    return path;
  }
  const p = pathname.toLowerCase().replace(/(.)\/+$/, '$1');
  return NODE_ONLY.has(p) ? p : undefined;
}

/** The answer for sandbox traffic to a node-only envd path (envd listens on `envdPort`). */
export function nodeOnlyEnvdRefusal(route: SandboxRoute, envdPort: number): DomainError | undefined {
  if (route.port !== envdPort) return undefined;
  const p = nodeOnlyEnvdPath(route.path);
  return p === undefined
    ? undefined
    : new DomainError('forbidden', `envd's ${p} is called by the sandbox's node only, not through the proxy`);
}
