#!/usr/bin/env node
// Builds the single-file CLI: dist-bundle/aenv.mjs (or the path given as the first argument).
// Only Node >= 20 is needed to run it; no node_modules, no native code, any OS and CPU.
import { chmod, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const outfile = path.resolve(process.argv[2] ?? path.join(root, 'dist-bundle', 'aenv.mjs'));
const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8'));

await build({
  entryPoints: [path.join(root, 'src', 'main.ts')],
  outfile,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  minify: false,
  legalComments: 'none',
  logLevel: 'warning',
  define: { AENV_VERSION: JSON.stringify(pkg.version) },
  // CommonJS dependencies (commander) call require() for Node built-ins.
  banner: {
    js: [
      '#!/usr/bin/env node',
      '/* eslint-disable */',
      `import { createRequire as __aenvCreateRequire } from 'node:module';`,
      'const require = __aenvCreateRequire(import.meta.url);',
    ].join('\n'),
  },
});
await chmod(outfile, 0o755);
console.log(`wrote ${path.relative(process.cwd(), outfile) || outfile}`);
