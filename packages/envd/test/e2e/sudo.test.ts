import { type ChildProcess, execFileSync, spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_OUT } from '../../scripts/build-tools-bundle.js';
import { eventually } from '@agentenv/test-support';
import { initEnvd, startEnvdProcess, type EnvdProcess } from '@agentenv/test-support/envd';

// envd runs on the host as root with its sudo socket in a private directory; the client runs as
// the test account `user` (made a member of group sudo for the file, if it was not) and `nobody`.
const CLIENT = fileURLToPath(new URL('../../dist/sudo/client.js', import.meta.url));
const SOCKET_DIR = `/tmp/aenv-sudo-e2e-${process.pid}`;
const SOCKET = `${SOCKET_DIR}/sudo.sock`;

let envd: EnvdProcess;
let addedToSudo = false;
let createdSudoGroup = false;
let tmp: string;

/** runuser's argv running the sudo client as `account` (so not through envd). */
const clientArgv = (account: string, args: string[], env: string[] = []) => [
  '-u',
  account,
  '--',
  'env',
  `AENV_SUDO_SOCKET=${SOCKET}`,
  ...env,
  process.execPath,
  CLIENT,
  ...args,
];

/** Runs the sudo client as `account` with `input` on stdin. */
function sudoAs(
  account: string,
  args: string[],
  opts: { input?: string | Buffer; env?: string[] } = {},
): SpawnSyncReturns<Buffer> {
  return spawnSync('runuser', clientArgv(account, args, opts.env), {
    input: opts.input ?? '',
    timeout: 30_000,
    maxBuffer: 64 << 20,
  });
}

const out = (r: SpawnSyncReturns<Buffer>) => r.stdout.toString();

function groupMembers(group: string): string[] | undefined {
  const r = spawnSync('getent', ['group', group], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  return (r.stdout.trim().split(':')[3] ?? '').split(',').filter(Boolean);
}

beforeAll(async () => {
  envd = await startEnvdProcess(['--sudo-socket', SOCKET]);
  // /health may have been answered by another envd already on the port, which ours then left.
  if (envd.child.exitCode !== null || !fs.existsSync(SOCKET)) {
    throw new Error(`envd did not start its sudo service at ${SOCKET}: is another envd on port 49983?`);
  }
  let members = groupMembers('sudo');
  if (!members) {
    execFileSync('groupadd', ['sudo']);
    createdSudoGroup = true;
    members = [];
  }
  if (!members.includes('user')) {
    execFileSync('gpasswd', ['-a', 'user', 'sudo'], { stdio: 'ignore' });
    addedToSudo = true;
  }
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'aenv-sudo-e2e-'));
  fs.chmodSync(tmp, 0o755);
});

afterAll(async () => {
  await envd?.stop();
  if (addedToSudo) execFileSync('gpasswd', ['-d', 'user', 'sudo'], { stdio: 'ignore' });
  if (createdSudoGroup) execFileSync('groupdel', ['sudo']);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  fs.rmSync(SOCKET_DIR, { recursive: true, force: true });
});

describe('sudo through envd', () => {
  it('listens on a socket anyone may connect to, beside a private proof directory', () => {
    const sock = fs.lstatSync(SOCKET);
    expect(sock.isSocket()).toBe(true);
    expect(sock.uid).toBe(0);
    expect(sock.mode & 0o7777).toBe(0o666);
    const dir = fs.statSync(SOCKET_DIR);
    expect([dir.uid, dir.mode & 0o7777]).toEqual([0, 0o755]);
    const auth = fs.statSync(`${SOCKET_DIR}/sudo-auth`);
    expect([auth.uid, auth.mode & 0o7777]).toEqual([0, 0o1733]);
    // Proof files are gone once used.
    expect(sudoAs('user', ['-n', 'true']).status).toBe(0);
    expect(fs.readdirSync(`${SOCKET_DIR}/sudo-auth`)).toEqual([]);
  });

  it('runs commands as root for a member of group sudo', () => {
    expect(sudoAs('user', ['-n', 'true']).status).toBe(0);
    const r = sudoAs('user', ['id', '-u']);
    expect([r.status, out(r)]).toEqual([0, '0\n']);
    const env = out(sudoAs('user', ['sh', '-c', 'echo $SUDO_USER $USER $HOME']));
    expect(env).toBe('user root /root\n');
  });

  it('runs commands as another user with -u', () => {
    expect(out(sudoAs('user', ['-u', 'nobody', 'id', '-un']))).toBe('nobody\n');
    expect(out(sudoAs('user', ['-u', '#65534', 'id', '-u']))).toBe('65534\n');
    const r = sudoAs('user', ['-u', 'no-such-user', 'true']);
    expect([r.status, r.stderr.toString()]).toEqual([1, 'sudo: unknown user no-such-user\n']);
  });

  it('propagates exit codes and signal deaths', () => {
    expect(sudoAs('user', ['sh', '-c', 'exit 7']).status).toBe(7);
    expect(sudoAs('user', ['sh', '-c', 'kill -TERM $$']).status).toBe(143);
    const r = sudoAs('user', ['no-such-command']);
    expect([r.status, r.stderr.toString()]).toEqual([1, 'sudo: no-such-command: command not found\n']);
    const bad = sudoAs('user', ['-z', 'true']);
    expect(bad.status).toBe(1);
    expect(bad.stderr.toString()).toMatch(/^sudo: invalid option -- 'z'\nusage: sudo/);
  });

  it('pipes stdin through: echo hi | sudo tee /root/file', () => {
    const file = `/root/aenv-sudo-test-${process.pid}`;
    try {
      const r = sudoAs('user', ['tee', file], { input: 'hi\n' });
      expect([r.status, out(r)]).toEqual([0, 'hi\n']);
      expect(fs.readFileSync(file, 'utf8')).toBe('hi\n');
      expect(fs.statSync(file).uid).toBe(0);
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  it('streams large binary input and output intact', () => {
    const data = randomBytes(6 << 20);
    const r = sudoAs('user', ['cat'], { input: data });
    expect(r.status).toBe(0);
    expect(r.stdout.equals(data)).toBe(true);
  });

  it('preserves the environment with -E, and resets it otherwise', () => {
    const env = ['AENV_SUDO_VAR=kept'];
    expect(out(sudoAs('user', ['-E', 'sh', '-c', 'echo "$AENV_SUDO_VAR $HOME"'], { env }))).toBe(
      'kept /home/user\n',
    );
    expect(out(sudoAs('user', ['sh', '-c', 'echo "[$AENV_SUDO_VAR]"'], { env }))).toBe('[]\n');
    expect(out(sudoAs('user', ['--preserve-env=AENV_SUDO_VAR', 'printenv', 'AENV_SUDO_VAR'], { env }))).toBe(
      'kept\n',
    );
    expect(out(sudoAs('user', ['X=1', 'printenv', 'X']))).toBe('1\n');
  });

  it('runs login shells and shells', () => {
    expect(out(sudoAs('user', ['-i', 'pwd']))).toBe('/root\n');
    expect(out(sudoAs('user', ['-s', 'echo', '$HOME']))).toBe('/root\n');
    expect(out(sudoAs('user', ['-l']))).toMatch(
      /^User user may run the following commands on .*:\n {4}\(ALL : ALL\) NOPASSWD: ALL\n$/,
    );
  });

  it('gives the command a terminal when the client has one', async () => {
    // script(1) runs the client on a pseudo-terminal of its own. Its stdin stays open until it
    // exits: at the end of its stdin script types ^D, which the client, once its terminal is raw,
    // forwards to the command's terminal as input, and that terminal echoes it, depending on timing.
    const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
    const client = clientArgv('user', ['sh', '-c', 'tty; stty size; id -u; exit 3'])
      .slice(3)
      .map(quote)
      .join(' ');
    const script = spawn('runuser', ['-u', 'user', '--', 'script', '-qec', client, '/dev/null']);
    let stdout = '';
    script.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const status = await new Promise<number | null>((resolve) => script.once('close', resolve));
    script.stdin.end();
    expect(status).toBe(3);
    expect(stdout.replace(/\r/g, '')).toMatch(/\/dev\/pts\/\d+\n24 80\n0\n/);
  });

  it('refuses a user who is neither in group sudo nor in sudoers', () => {
    const r = sudoAs('nobody', ['id', '-u']);
    expect(r.status).toBe(1);
    expect(out(r)).toBe('');
    expect(r.stderr.toString()).toMatch(/^sudo: nobody is not in the sudoers file/);
    expect(sudoAs('nobody', ['-v']).status).toBe(1);
  });

  it('relays signals to the command, and kills it when the client dies', async () => {
    // runuser's child is the client.
    const clientOf = (runuser: ChildProcess) =>
      Number(execFileSync('pgrep', ['-P', String(runuser.pid)], { encoding: 'utf8' }).trim());
    // The commands run under a name of their own, so they are found among the machine's processes.
    const alive = (marker: string) => spawnSync('pgrep', ['-f', `^${marker}`]).status === 0;
    const named = (marker: string) => ['bash', '-c', `exec -a ${marker} sleep 30`];

    const relayed = `aenv-sudo-relayed-${process.pid}`;
    const first = spawn('runuser', clientArgv('user', named(relayed)));
    const code = new Promise<number | null>((resolve) => first.once('exit', (c) => resolve(c)));
    await eventually(() => expect(alive(relayed)).toBe(true));
    process.kill(clientOf(first), 'SIGTERM');
    expect(await code).toBe(143);

    const orphan = `aenv-sudo-orphan-${process.pid}`;
    const second = spawn('runuser', clientArgv('user', named(orphan)));
    const ended = new Promise<void>((resolve) => second.once('exit', () => resolve()));
    await eventually(() => expect(alive(orphan)).toBe(true));
    process.kill(clientOf(second), 'SIGKILL');
    await ended;
    await eventually(() => expect(alive(orphan)).toBe(false));
  });

  it('works for processes envd starts, which have no supplementary groups', async () => {
    expect((await initEnvd({ envVars: { AENV_SANDBOX_WIDE: 'everywhere' } })).status).toBe(204);
    const { Sandbox } = await import('e2b');
    const sbx = await Sandbox.create();
    expect((await sbx.commands.run('id -Gn', { user: 'user' })).stdout).toBe('user\n');
    const r = await sbx.commands.run(
      `echo hi | ${process.execPath} ${CLIENT} sh -c 'id -u; cat; echo $AENV_SANDBOX_WIDE'`,
      {
        user: 'user',
        envs: { AENV_SUDO_SOCKET: SOCKET },
      },
    );
    expect(r.stdout).toBe('0\nhi\neverywhere\n');
  });

  it('ships in the tools bundle, found through a symlink in PATH', () => {
    // The bundle `npm run build` made, which sandboxes mount (tools-bundle.test.ts builds one).
    const bin = path.join(tmp, 'bin');
    fs.mkdirSync(bin, { mode: 0o755 });
    fs.symlinkSync(path.join(DEFAULT_OUT, 'bin', 'sudo'), path.join(bin, 'sudo'));
    const r = spawnSync(
      'runuser',
      [
        '-u',
        'user',
        '--',
        'env',
        `AENV_SUDO_SOCKET=${SOCKET}`,
        `PATH=${bin}:/usr/bin:/bin`,
        'sh',
        '-c',
        'sudo id -u && sudo -V',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^0\nSudo version \d/);
  });
});
