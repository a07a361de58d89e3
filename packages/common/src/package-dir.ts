import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * The directory of package `name` as Node resolves it from the module at `from` (the caller's
 * `import.meta.url`). A path built on it is the same from a package's sources, its compiled files
 * and a bundle of them, wherever the bundle lies; a path relative to `import.meta.url` is not.
 * The package must export `./package.json` (a package may name itself).
 */
export function packageDir(name: string, from: string): string {
  return dirname(createRequire(from).resolve(`${name}/package.json`));
}

/** The version in package `name`'s package.json, found as packageDir finds the package. */
export function packageVersion(name: string, from: string): string {
  const pkg = JSON.parse(readFileSync(join(packageDir(name, from), 'package.json'), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}
