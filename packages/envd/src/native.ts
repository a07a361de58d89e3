import { createRequire } from 'node:module';

const loaded = new Map<string, unknown>();

/**
 * A native addon of the tools bundle (native/<name>.node beside envd.mjs, built from
 * packages/envd/native/<name>.c), or null where there is none: tests and dist/ run without them.
 */
export function loadAddon<T>(name: string): T | null {
  if (!loaded.has(name)) {
    try {
      loaded.set(name, createRequire(import.meta.url)(`./native/${name}.node`));
    } catch {
      loaded.set(name, null);
    }
  }
  return loaded.get(name) as T | null;
}
