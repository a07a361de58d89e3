import { fileURLToPath } from 'node:url';
import { packageDir as resolvePackageDir } from '@agentenv/common';

/** The repository's root directory, with a trailing slash. */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The directory of a workspace package (from its package.json, which every package exports). */
export function packageDir(name: string): string {
  return resolvePackageDir(name, import.meta.url);
}

/**
 * A script beside `moduleUrl` to run in its own process (with the tsx loader): the `.ts` source
 * when the caller runs from source, its compiled `.js` otherwise.
 */
export function siblingScript(moduleUrl: string, name: string): string {
  return fileURLToPath(new URL(`./${name}${moduleUrl.endsWith('.ts') ? '.ts' : '.js'}`, moduleUrl));
}

/**
 * Node flags for such a script, so that it runs the same code as its caller: run from source
 * (vitest), workspace packages resolve to their sources too (their `source` export condition).
 */
export function sameSourceFlags(moduleUrl: string): string[] {
  return moduleUrl.endsWith('.ts') ? ['--conditions=source'] : [];
}
