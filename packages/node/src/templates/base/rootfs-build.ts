import { access } from 'node:fs/promises';
import type { Log } from '@agentenv/common';
import { ImageBuildError } from '@agentenv/oci';
import { runProcess } from '../../util/index.js';
import { mmdebstrapArgs, type RootfsRecipe } from './recipe.js';

const MMDEBSTRAP = '/usr/bin/mmdebstrap';
/** Lines of mmdebstrap's output kept for the error when it fails. */
const TAIL_LINES = 40;

/** Fills `target` (an empty directory) with the Debian root filesystem the recipe describes. */
export async function buildDebianRootfs(
  recipe: RootfsRecipe,
  target: string,
  log: Log,
  signal?: AbortSignal,
): Promise<void> {
  await access(MMDEBSTRAP).catch(() => {
    throw new ImageBuildError(
      `${MMDEBSTRAP} is missing: run scripts/setup.sh (or apt-get install mmdebstrap debian-archive-keyring)`,
    );
  });
  const started = Date.now();
  log.info(`rootfs: mmdebstrap ${recipe.suite} (${recipe.variant}) from ${recipe.mirror} into ${target}`);
  const tail: string[] = [];
  const result = await runProcess(MMDEBSTRAP, mmdebstrapArgs(recipe, target), {
    onLine: (line) => {
      tail.push(line);
      if (tail.length > TAIL_LINES) tail.shift();
      log.info(`rootfs: ${line}`);
    },
    ...(signal ? { signal } : {}),
  });
  if (result.code !== 0) {
    throw new ImageBuildError(
      `mmdebstrap failed (${result.signal ?? `exit ${result.code}`})`,
      tail.join('\n'),
    );
  }
  log.info(`rootfs: built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
