import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  commandEnv,
  commandPlan,
  maySudo,
  readSudoers,
  shellCommandLine,
  sudoersGrantsAll,
} from '../../src/sudo/policy.js';
import { parseGroups, UserDatabase, type SystemUser } from '../../src/users.js';

const user: SystemUser = { name: 'user', uid: 1000, gid: 1000, home: '/home/user', shell: '/bin/bash' };
const root: SystemUser = { name: 'root', uid: 0, gid: 0, home: '/root', shell: '/bin/bash' };
const groups = [
  { name: 'user', gid: 1000, members: [] },
  { name: 'docker', gid: 998, members: ['user'] },
];

describe('sudoersGrantsAll', () => {
  const grants = (text: string) => sudoersGrantsAll(text, user, groups);

  it('matches ALL rules for the user, its uid, its groups or everyone', () => {
    expect(grants('user ALL=(ALL:ALL) NOPASSWD:ALL')).toBe(true);
    expect(grants('user ALL=(ALL) NOPASSWD: ALL')).toBe(true);
    expect(grants('user ALL = (ALL : ALL) ALL')).toBe(true);
    expect(grants('user ALL=ALL')).toBe(true);
    expect(grants('#1000 ALL=(ALL) NOPASSWD:SETENV: ALL')).toBe(true);
    expect(grants('%docker ALL=(ALL) NOPASSWD: ALL')).toBe(true);
    expect(grants('%#998 ALL=(ALL) ALL')).toBe(true);
    expect(grants('alice, user ALL=(ALL) ALL')).toBe(true);
    expect(grants('ALL ALL=(ALL) NOPASSWD: ALL')).toBe(true);
    expect(grants('user ALL=(ALL) \\\n  NOPASSWD: ALL')).toBe(true);
  });

  it('ignores other users, comments, defaults, aliases and limited rules', () => {
    expect(grants('alice ALL=(ALL) NOPASSWD: ALL')).toBe(false);
    expect(grants('%sudo ALL=(ALL:ALL) ALL')).toBe(false);
    expect(grants('# user ALL=(ALL) NOPASSWD: ALL')).toBe(false);
    expect(grants('#includedir /etc/sudoers.d')).toBe(false);
    expect(grants('Defaults env_reset\nDefaults:user !requiretty')).toBe(false);
    expect(grants('User_Alias ADMINS = user')).toBe(false);
    expect(grants('user ALL=(ALL) NOPASSWD: /usr/bin/apt-get')).toBe(false);
    expect(grants('user ALL=(www-data) NOPASSWD: ALL')).toBe(false);
    expect(grants('user ALL=(ALL) ALL, !/bin/sh')).toBe(false);
  });
});

describe('maySudo', () => {
  const made: string[] = [];
  afterEach(() => {
    for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });
  const setup = (files: Record<string, string>) => {
    const etc = fs.mkdtempSync(path.join(os.tmpdir(), 'aenv-sudo-etc-'));
    made.push(etc);
    fs.mkdirSync(path.join(etc, 'sudoers.d'));
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(etc, name), text);
    return new UserDatabase(etc);
  };
  const passwd = 'root:x:0:0::/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n';

  it('allows root, sudo and wheel members and sudoers.d rules', () => {
    expect(maySudo(setup({ passwd, group: 'user:x:1000:\n' }), root)).toBe(true);
    expect(maySudo(setup({ passwd, group: 'user:x:1000:\n' }), user)).toBe(false);
    expect(maySudo(setup({ passwd, group: 'sudo:x:27:alice,user\n' }), user)).toBe(true);
    expect(maySudo(setup({ passwd, group: 'wheel:x:10:user\n' }), user)).toBe(true);
    expect(
      maySudo(setup({ passwd, group: '', 'sudoers.d/90-user': 'user ALL=(ALL:ALL) NOPASSWD:ALL\n' }), user),
    ).toBe(true);
  });

  it('reads sudoers.d like sudo: names with a dot or a trailing ~ are skipped', () => {
    const db = setup({
      passwd,
      sudoers: 'root ALL=(ALL) ALL\n',
      'sudoers.d/a.bak': 'user ALL=ALL',
      'sudoers.d/b~': 'user ALL=ALL',
    });
    expect(readSudoers(db.root)).toEqual(['root ALL=(ALL) ALL\n']);
    expect(maySudo(db, user)).toBe(false);
  });

  it('finds groups by name, #gid and membership', () => {
    const db = setup({ passwd, group: 'user:x:1000:\nsudo:x:27:user\nadm:x:4:alice\n' });
    expect(db.group('sudo').gid).toBe(27);
    expect(db.group('#4').name).toBe('adm');
    expect(() => db.group('nope')).toThrow(/unknown group/);
    expect(db.groupsOf(user).map((g) => g.name)).toEqual(['user', 'sudo']);
    expect(parseGroups('bad\nx:y:z:\ng:x:5: a , b \n')).toEqual([{ name: 'g', gid: 5, members: ['a', 'b'] }]);
  });
});

describe('commandEnv', () => {
  const callerEnv = {
    HOME: '/home/user',
    USER: 'user',
    SHELL: '/bin/zsh',
    PATH: '/home/user/bin:/usr/bin',
    TERM: 'xterm',
    LANG: 'C.UTF-8',
    LC_ALL: 'C',
    FOO: 'bar',
    LD_PRELOAD: '/x.so',
    PYTHONPATH: '/p',
    BASH_FUNC_f: '() { :; }',
  };
  const env = (request: Parameters<typeof commandEnv>[0]['request'], target = root) =>
    commandEnv({ request, caller: user, target, securePath: '/sbin:/bin', command: '/usr/bin/env' });

  it('resets the environment to a few kept variables and the target identity', () => {
    expect(env({ env: callerEnv })).toEqual({
      TERM: 'xterm',
      LANG: 'C.UTF-8',
      LC_ALL: 'C',
      HOME: '/root',
      USER: 'root',
      LOGNAME: 'root',
      SHELL: '/bin/bash',
      MAIL: '/var/mail/root',
      PATH: '/sbin:/bin',
      SUDO_COMMAND: '/usr/bin/env',
      SUDO_USER: 'user',
      SUDO_UID: '1000',
      SUDO_GID: '1000',
    });
  });

  it('keeps everything but the unsafe variables with -E; HOME goes with -H', () => {
    const e = env({ env: callerEnv, preserveEnv: true });
    expect(e).toMatchObject({
      FOO: 'bar',
      HOME: '/home/user',
      SHELL: '/bin/zsh',
      USER: 'root',
      PATH: '/sbin:/bin',
    });
    expect(e.LD_PRELOAD).toBeUndefined();
    expect(e.PYTHONPATH).toBeUndefined();
    expect(e.BASH_FUNC_f).toBeUndefined();
    expect(env({ env: callerEnv, preserveEnv: true, setHome: true }).HOME).toBe('/root');
  });

  it('keeps listed variables, applies assignments last, and resets for -i', () => {
    expect(env({ env: callerEnv, preserveEnv: ['FOO', 'PYTHONPATH'] })).toMatchObject({
      FOO: 'bar',
      PYTHONPATH: '/p',
    });
    expect(env({ env: callerEnv, assignments: { PATH: '/opt', X: '1' } })).toMatchObject({
      PATH: '/opt',
      X: '1',
    });
    expect(env({ env: callerEnv, login: true, preserveEnv: true }).FOO).toBeUndefined();
    expect(env({ env: callerEnv }, user)).toMatchObject({
      HOME: '/home/user',
      USER: 'user',
      SUDO_USER: 'user',
    });
  });
});

describe('commandPlan', () => {
  it('quotes like sudo for shell -c', () => {
    expect(shellCommandLine(['echo', '$HOME', 'a b', "it's", 'x_y-1'])).toBe("echo $HOME a\\ b it\\'s x_y-1");
  });

  it('runs the command, a shell (-s) or a login shell (-i)', () => {
    const env = { SHELL: '/bin/zsh' };
    expect(commandPlan({ argv: ['id', '-u'], env }, user, root)).toEqual({ file: 'id', args: ['-u'] });
    expect(commandPlan({ argv: [], shell: true, env }, user, root)).toEqual({ file: '/bin/zsh', args: [] });
    expect(commandPlan({ argv: ['echo', 'a b'], shell: true, env: {} }, user, root)).toEqual({
      file: '/bin/bash',
      args: ['-c', 'echo a\\ b'],
    });
    expect(commandPlan({ argv: [], login: true, env }, user, root)).toEqual({
      file: '/bin/bash',
      args: ['-l'],
    });
    expect(commandPlan({ argv: ['pwd'], login: true, env }, user, root)).toEqual({
      file: '/bin/bash',
      args: ['-l', '-c', 'pwd'],
    });
  });
});
