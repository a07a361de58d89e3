/**
 * Bundles each service's compiled entry point (packages/<name>/dist/main.js) into
 * packages/<name>/dist/bundle/, which its `aenv-*` command runs. A node, gateway or scheduler then
 * starts by reading a few files instead of resolving and loading hundreds of ES modules: about
 * half the CPU a start costs (docs/development.md). Run by `npm run build`, after tsc.
 *
 * Left in node_modules: packages with native code; those that use `__dirname` (pino starts its
 * transports' workers from its own directory, ioredis trims its friendly error stacks by it); and
 * the S3 SDK, which a node imports only when its repository is S3 (bundled, every start would
 * read its megabyte).
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVICES = ['node', 'gateway', 'scheduler'];
const EXTERNAL = ['better-sqlite3', '@number0/iroh', 'pino', 'pino-pretty', 'ioredis', '@aws-sdk/client-s3'];

for (const service of SERVICES) {
  const dist = path.join(ROOT, 'packages', service, 'dist');
  const outdir = path.join(dist, 'bundle');
  await rm(outdir, { recursive: true, force: true });
  await build({
    entryPoints: { main: path.join(dist, 'main.js') },
    outdir,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    external: EXTERNAL,
    // Readable stack traces; mapped to the TypeScript sources with NODE_OPTIONS=--enable-source-maps.
    sourcemap: 'linked',
    legalComments: 'none',
    logLevel: 'warning',
    // CommonJS dependencies call require() for Node's built-in modules.
    banner: {
      js: "import { createRequire as __aenvCreateRequire } from 'node:module'; const require = __aenvCreateRequire(import.meta.url);",
    },
  });
}
