import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildRelease } from '../../release/build.js';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** Caches of the deployment tests that outlive a run: the release, a Debian root, apt downloads. */
export const CACHE = process.env.AENV_DEPLOY_TEST_CACHE ?? '/var/cache/aenv-deploy-test';

function newest(dir: string): number {
  if (!existsSync(dir)) return 0;
  const s = statSync(dir);
  if (!s.isDirectory()) return s.mtimeMs;
  let latest = s.mtimeMs;
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules') continue;
    latest = Math.max(latest, newest(path.join(dir, entry)));
  }
  return latest;
}

/** What a release is made of: every workspace's build, the deploy files, the scripts, the lockfile. */
function inputsChangedAt(): number {
  const packages = readdirSync(path.join(REPO, 'packages')).flatMap((p) =>
    ['dist', 'dist-tools', 'bin', 'native/build', 'package.json'].map((e) =>
      path.join(REPO, 'packages', p, e),
    ),
  );
  return Math.max(
    ...[...packages, 'deploy/systemd', 'deploy/config', 'deploy/release', 'scripts', 'package-lock.json']
      .map((p) => path.resolve(REPO, p))
      .map(newest),
  );
}

let made: Promise<string> | undefined;

/** The release tarball of this checkout (npm run build must have run), rebuilt when an input changed. */
export function releaseTarball(): Promise<string> {
  made ??= (async () => {
    // One directory per checkout: worktrees on one machine share the cache but not their inputs.
    const outDir = path.join(CACHE, 'release', createHash('sha256').update(REPO).digest('hex').slice(0, 12));
    mkdirSync(outDir, { recursive: true });
    const tarball = readdirSync(outDir, { withFileTypes: true })
      .map((e) => path.join(outDir, e.name))
      .find((f) => f.endsWith('.tar.gz'));
    if (tarball && statSync(tarball).mtimeMs > inputsChangedAt()) return tarball;
    rmSync(outDir, { recursive: true, force: true });
    const r = await buildRelease({ repo: REPO, outDir, log: (l) => console.log(`[release] ${l}`) });
    return r.tarball;
  })();
  return made;
}
