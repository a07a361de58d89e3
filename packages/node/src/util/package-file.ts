import { join } from 'node:path';
import { packageDir } from '@agentenv/common';

const NODE_DIR = packageDir('@agentenv/node', import.meta.url);

/**
 * A file of this package by its path from the package's root (`native/build/…`, `dist/…`): the
 * same file from the sources, the compiled modules and the bundled binary.
 */
export function packageFile(relative: string): string {
  return join(NODE_DIR, relative);
}
