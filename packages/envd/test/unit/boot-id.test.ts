import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { BootId } from '../../src/boot-id.js';

const dir = mkdtempSync(join(tmpdir(), 'aenv-boot-id-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const logger = pino({ level: 'silent' });
const ID_A = '0f2c6d0e-0b8a-4d8e-9a47-3b1f6c2f9e10';
const ID_B = '5d7f9c3a-1e2b-4c6d-8e9f-0a1b2c3d4e5f';

/** A fake of native/bind-mount.node that records its calls and answers `result`. */
function fakeAddon(result = 0) {
  const calls: [string, string][] = [];
  return {
    calls,
    bindMountReadOnly: (source: string, target: string) => (calls.push([source, target]), result),
  };
}

describe('boot id', () => {
  it('writes each id to its own file and mounts it over the kernel one once', () => {
    const paths = { source: join(dir, 'once'), target: '/proc/sys/kernel/random/boot_id' };
    const addon = fakeAddon();
    const b = new BootId(logger, addon, paths);
    b.set(ID_A);
    expect(readFileSync(paths.source, 'utf8')).toBe(`${ID_A}\n`);
    expect(statSync(paths.source).mode & 0o777).toBe(0o444);
    b.set(ID_B);
    expect(readFileSync(paths.source, 'utf8')).toBe(`${ID_B}\n`);
    expect(addon.calls).toEqual([[paths.source, paths.target]]);
  });

  it('tries the mount again at the next id when it failed', () => {
    const paths = { source: join(dir, 'retry'), target: join(dir, 'target') };
    const addon = fakeAddon(-1);
    const b = new BootId(logger, addon, paths);
    b.set(ID_A);
    b.set(ID_B);
    expect(addon.calls).toHaveLength(2);
  });

  it('changes nothing without the addon (envd outside the tools bundle)', () => {
    const paths = { source: join(dir, 'none'), target: join(dir, 'target') };
    new BootId(logger, null, paths).set(ID_A);
    expect(() => statSync(paths.source)).toThrow();
  });
});
