import { existsSync } from 'node:fs';
import path from 'node:path';
import { BASE_RECIPE, recipeHash } from '../../../packages/node/src/image/recipe.js';
import type { Bind } from './nspawn.js';

/** Where the node e2e tests cache the base template's root filesystem (built once per machine). */
const TEST_HOME = process.env.AENV_TEST_HOME ?? '/var/lib/aenv-test';

/**
 * The cached base root filesystem, lent read-only to a node whose home is `home` (inside a
 * container), so it skips the minute-long mmdebstrap build; none when the cache is absent (the
 * node then builds it itself).
 */
export function baseLayerBinds(home: string): Bind[] {
  const id = recipeHash(BASE_RECIPE);
  const cached = path.join(TEST_HOME, 'layers', id);
  return existsSync(cached) ? [{ host: cached, guest: path.join(home, 'layers', id), readOnly: true }] : [];
}
