import { readFileSync } from 'node:fs';

/** Set by the single-file bundle (esbuild `define`); read from package.json otherwise. */
declare const AENV_VERSION: string | undefined;

function fromPackageJson(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

export const VERSION: string = typeof AENV_VERSION === 'string' ? AENV_VERSION : fromPackageJson();
