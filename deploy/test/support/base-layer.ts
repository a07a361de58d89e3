import { existsSync } from 'node:fs';
import path from 'node:path';
import { BASE_RECIPE, recipeHash } from '@agentenv/node';
import { TEST_HOME } from '@agentenv/test-support/runtime';
import type { Bind } from './nspawn.js';

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
