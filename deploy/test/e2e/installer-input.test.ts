import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/release.js';
import { run } from '../support/run.js';

/**
 * The installer refuses what it cannot do before touching anything. These run on this machine
 * itself (Debian 12, root), so every case must fail before the first change; a snapshot of
 * everything the installer would write is compared before and after.
 */
const INSTALL = path.join(REPO, 'scripts', 'install.sh');
const UNINSTALL = path.join(REPO, 'scripts', 'uninstall.sh');
const TOUCHED = [
  '/opt/aenv',
  '/etc/aenv',
  '/etc/default/aenv',
  '/etc/systemd/system/aenv.service',
  '/etc/systemd/system/aenv-scheduler.service',
  '/etc/systemd/system/aenv-gateway.service',
  '/usr/local/bin/aenv',
  '/etc/apt/sources.list.d',
];

const snapshot = () =>
  run('sh', [
    '-c',
    `find ${TOUCHED.join(' ')} -maxdepth 2 -printf '%p %y %s %m %T@\\n' 2>/dev/null | sort`,
  ]).then((r) => r.stdout);

const isRoot = process.getuid?.() === 0;
if (!isRoot)
  console.warn('deploy/test/e2e/installer-input.test.ts skipped: the cases run the installer as root');
describe.skipIf(!isRoot)('install.sh and uninstall.sh on bad input', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'aenv-installer-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const osRelease = (name: string, text: string) => {
    const file = path.join(dir, name);
    writeFileSync(file, text);
    return file;
  };

  it.each([
    [
      'not root',
      ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', 'bash', INSTALL],
      {},
      /run as root/,
    ],
    [
      'an unsupported OS (Fedora)',
      ['bash', INSTALL],
      { AENV_OS_RELEASE: osRelease('fedora', 'ID=fedora\nVERSION_ID=40\nPRETTY_NAME="Fedora Linux 40"\n') },
      /unsupported operating system: Fedora Linux 40 \(supported: Debian 12 bookworm, Ubuntu 24.04 noble\)/,
    ],
    [
      'an older Debian',
      ['bash', INSTALL],
      {
        AENV_OS_RELEASE: osRelease(
          'bullseye',
          'ID=debian\nVERSION_CODENAME=bullseye\nPRETTY_NAME="Debian 11"\n',
        ),
      },
      /unsupported operating system: Debian 11/,
    ],
    ['an unknown role', ['bash', INSTALL, '--role', 'everything'], {}, /unknown role: everything/],
    ['an unknown option', ['bash', INSTALL, '--force'], {}, /unknown option: --force/],
    [
      'a missing tarball',
      ['bash', INSTALL, '--from', '/nonexistent/aenv.tar.gz'],
      {},
      /no such release tarball/,
    ],
    [
      'uninstall, not root',
      ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', 'bash', UNINSTALL],
      {},
      /run as root/,
    ],
    ['uninstall, an unknown option', ['bash', UNINSTALL, '--all'], {}, /unknown option: --all/],
  ] as const)('%s: a clear message, exit 1, nothing changed', async (_what, cmd, env, message) => {
    const before = await snapshot();
    const r = await run(cmd[0], cmd.slice(1), { env: { ...process.env, ...env } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(message);
    expect(await snapshot()).toEqual(before);
  });

  it('a tarball that does not match its .sha256: refused, nothing changed', async () => {
    const tarball = path.join(dir, 'aenv-9.9.9-linux-x64.tar.gz');
    writeFileSync(tarball, 'not a release');
    writeFileSync(`${tarball}.sha256`, `${'0'.repeat(64)}  aenv-9.9.9-linux-x64.tar.gz\n`);
    const before = await snapshot();
    const r = await run('bash', [INSTALL, '--from', tarball]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/does not match .*\.sha256/);
    expect(await snapshot()).toEqual(before);
  });
});
