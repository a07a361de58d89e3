import { describe, expect, it } from 'vitest';
import {
  BASE_RECIPE,
  canonicalJson,
  mmdebstrapArgs,
  readyStateKey,
  recipeHash,
} from '../../src/templates/base/recipe.js';

describe('recipe hashing', () => {
  it('ignores key and package order, changes with content', () => {
    const shuffled = { ...BASE_RECIPE, packages: [...BASE_RECIPE.packages].reverse() };
    expect(recipeHash(shuffled)).toBe(recipeHash(BASE_RECIPE));
    expect(recipeHash({ ...BASE_RECIPE, packages: [...BASE_RECIPE.packages, 'vim'] })).not.toBe(
      recipeHash(BASE_RECIPE),
    );
    expect(canonicalJson({ b: 1, a: [2, { d: 1, c: 2 }] })).toBe('{"a":[2,{"c":2,"d":1}],"b":1}');
    expect(recipeHash(BASE_RECIPE)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('keys the ready state by rootfs, tools and runtime', () => {
    const k = readyStateKey({ rootfs: 'a', tools: 'b', runtime: 'gvisor@1' });
    expect(readyStateKey({ rootfs: 'a', tools: 'b', runtime: 'gvisor@2' })).not.toBe(k);
    expect(readyStateKey({ rootfs: 'a', tools: 'c', runtime: 'gvisor@1' })).not.toBe(k);
  });
});

describe('mmdebstrapArgs', () => {
  it('builds the base template as E2B-COMPAT §4 asks', () => {
    const args = mmdebstrapArgs(BASE_RECIPE, '/tmp/x');
    expect(args.slice(-3)).toEqual(['bookworm', '/tmp/x', 'http://deb.debian.org/debian']);
    const include = args.find((a) => a.startsWith('--include='))!;
    for (const p of [
      'bash',
      'python3',
      'python-is-python3',
      'git',
      'curl',
      'sudo',
      'nodejs',
      'ca-certificates',
    ]) {
      expect(include.split(/[=,]/)).toContain(p);
    }
    const hooks = args.filter((a) => a.startsWith('--customize-hook=')).join('\n');
    expect(hooks).toContain('useradd --uid 1000 --create-home --home-dir /home/user --shell /bin/bash');
    expect(hooks).toContain('NOPASSWD:ALL');
  });
});
