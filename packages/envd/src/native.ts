import { createRequire } from 'node:module';

const loaded = new Map<string, unknown>();

/**
 * A native addon built from packages/envd/native/<name>.c, or null where there is none: in the
 * tools bundle native/<name>.node beside envd.mjs; run from the package (src/, dist/),
 * native/build/<name>.node, which holds only the addons envd needs wherever it runs
 * (scripts/build-tools-bundle.ts, PACKAGE_ADDONS).
 */
export function loadAddon<T>(name: string): T | null {
  if (!loaded.has(name)) {
    const require = createRequire(import.meta.url);
    let addon: unknown = null;
    for (const file of [`./native/${name}.node`, `../native/build/${name}.node`]) {
      try {
        addon = require(file);
        break;
      } catch {
        // not there: the next place, or none
      }
    }
    loaded.set(name, addon);
  }
  return loaded.get(name) as T | null;
}
