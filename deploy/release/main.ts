/**
 * `npm run release [-- --out DIR] [--keep-tree]`: builds aenv-<version>-linux-<arch>.tar.gz and its
 * .sha256 from a built checkout (npm run build), into dist/ by default.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildRelease } from './build.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { values } = parseArgs({
  options: { out: { type: 'string' }, 'keep-tree': { type: 'boolean', default: false } },
});
const started = Date.now();
buildRelease({
  repo,
  outDir: path.resolve(values.out ?? path.join(repo, 'dist')),
  keepTree: values['keep-tree'],
  log: (line) => console.log(`[release] ${line}`),
}).then(
  (r) => {
    const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
    console.log(`[release] commands: ${r.commands.join(', ')}`);
    console.log(
      `[release] ${r.tarball} (${mib(r.tarballBytes)}, unpacked ${mib(r.treeBytes)}) in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    console.log(`[release] sha256 ${r.sha256} (${path.basename(r.checksumFile)})`);
  },
  (err: unknown) => {
    console.error(`release: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
