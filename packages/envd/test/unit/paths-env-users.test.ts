import { describe, expect, it } from 'vitest';
import { DEFAULT_PATH, processEnv } from '../../src/env.js';
import { resolveUserPath } from '../../src/paths.js';
import { parseGroup, parsePasswd } from '../../src/users.js';

describe('resolveUserPath', () => {
  const home = '/home/user';
  it('resolves like E2B envd', () => {
    expect(resolveUserPath('/etc/passwd', home)).toBe('/etc/passwd');
    expect(resolveUserPath('file.txt', home)).toBe('/home/user/file.txt');
    expect(resolveUserPath('~', home)).toBe('/home/user');
    expect(resolveUserPath('~/a/../b', home)).toBe('/home/user/b');
    expect(resolveUserPath('../../etc', home)).toBe('/etc');
    expect(resolveUserPath('', home)).toBe('/home/user');
    expect(resolveUserPath('', home, '/work')).toBe('/work');
    expect(resolveUserPath('/a//b/./c/', home)).toBe('/a/b/c');
  });
  it("refuses other users' homes and NUL bytes", () => {
    expect(() => resolveUserPath('~root/x', home)).toThrow(/cannot expand/);
    expect(() => resolveUserPath('a\0b', home)).toThrow(/NUL/);
  });
});

describe('processEnv', () => {
  const user = { name: 'user', uid: 1000, gid: 1000, home: '/home/user', shell: '/bin/bash' };
  it('layers base, sandbox-wide and request variables without mutating inputs', () => {
    const sandbox = { E2B_SANDBOX: 'true', A: 'sandbox' };
    const env = processEnv(user, sandbox, { A: 'request', B: 'b' });
    expect(env).toMatchObject({ PATH: DEFAULT_PATH, HOME: '/home/user', USER: 'user', LOGNAME: 'user' });
    expect(env.A).toBe('request');
    expect(env.E2B_SANDBOX).toBe('true');
    expect(sandbox).toEqual({ E2B_SANDBOX: 'true', A: 'sandbox' });
    expect(processEnv(user, sandbox, {}).B).toBeUndefined();
  });
});

describe('user database parsing', () => {
  it('parses passwd and skips malformed lines', () => {
    const users = parsePasswd(
      'root:x:0:0:root:/root:/bin/bash\n# c\nbad line\nuser:x:1000:1001::/home/user:\n',
    );
    expect(users).toEqual([
      { name: 'root', uid: 0, gid: 0, home: '/root', shell: '/bin/bash' },
      { name: 'user', uid: 1000, gid: 1001, home: '/home/user', shell: '/bin/sh' },
    ]);
  });
  it('parses group names by gid', () => {
    const g = parseGroup('root:x:0:\nsudo:x:27:user\n');
    expect(g.get(27)).toBe('sudo');
    expect(g.get(5)).toBeUndefined();
  });
});
