import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, API_KEY, URL_BASE, useTestServer } from '@agentenv/test-support/server';
import { aenv, aenvJson, AENV_BIN } from './cli-fixture.js';
import {
  baseLayer,
  imageBlobs,
  ociImage,
  shellLayer,
  skopeoPush,
  writeLayout,
  startRegistry,
} from '@agentenv/test-support/oci';

interface Listed {
  sandboxID: string;
  state: string;
  endAt: string;
  metadata: Record<string, string>;
}

useTestServer();
let work: string;
let sandboxId: string;
const created: string[] = [];

/** Starts a sandbox through the CLI (detached) and remembers it for cleanup. */
async function startSandbox(extra: string[] = []): Promise<string> {
  const sbx = await aenvJson<{ sandboxID: string }>(['start', 'base', '-d', ...extra]);
  created.push(sbx.sandboxID);
  return sbx.sandboxID;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'aenv-cli-e2e-'));
  sandboxId = await startSandbox(['--metadata', 'suite=cli', '--metadata', 'role=main', '-t', '600']);
});

afterAll(async () => {
  await Promise.all(created.map((id) => api('DELETE', `/sandboxes/${id}`).catch(() => undefined)));
  if (work) await rm(work, { recursive: true, force: true });
});

describe('auth', () => {
  it('says "not authenticated" without credentials, then uses the file `aenv auth` writes', async () => {
    const home = await mkdtemp(path.join(work, 'home-'));
    const env = { HOME: home, AENV_URL: undefined, AENV_API_KEY: undefined };
    const before = await aenv(['ls'], { env });
    expect(before.code).toBe(1);
    expect(before.stderr).toMatch(/not authenticated/);
    expect(before.stderr).toMatch(/aenv auth/);

    const saved = await aenv(['auth', '--url', URL_BASE], { env, input: `${API_KEY}\n` });
    expect(saved.code, saved.stderr).toBe(0);
    const file = path.join(home, '.config', 'aenv', 'credentials');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ url: URL_BASE, apiKey: API_KEY });

    const list = await aenvJson<Listed[]>(['ls'], { env });
    expect(list.map((s) => s.sandboxID)).toContain(sandboxId);
    const shown = await aenvJson<{ url: string; apiKey: string; source: string }>(['auth', '--show'], {
      env,
    });
    expect(shown).toMatchObject({ url: URL_BASE, source: file });
    expect(shown.apiKey).not.toContain(API_KEY.slice(8, -4));
  });

  it('refuses a wrong key with a clear 401 message and does not save it', async () => {
    const home = await mkdtemp(path.join(work, 'home-'));
    const env = { HOME: home, AENV_URL: undefined, AENV_API_KEY: undefined };
    const r = await aenv(['auth', '--url', URL_BASE], { env, input: 'e2b_deadbeef\n' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/credentials not saved: authentication failed: .* rejected the API key/);
    await expect(stat(path.join(home, '.config', 'aenv', 'credentials'))).rejects.toThrow();

    const envKey = await aenv(['ls'], { env: { AENV_API_KEY: 'e2b_deadbeef' } });
    expect(envKey.code).toBe(1);
    expect(envKey.stderr).toMatch(/authentication failed/);
  });
});

describe('start and ls', () => {
  it('starts detached sandboxes with metadata', async () => {
    const detail = await api('GET', `/sandboxes/${sandboxId}`);
    expect(detail.status).toBe(200);
    expect(detail.json.metadata).toEqual({ suite: 'cli', role: 'main' });
    expect(detail.json.state).toBe('running');
  });

  it('prints JSON when piped that matches the API, and filters', async () => {
    const list = await aenvJson<Listed[]>(['ls']);
    const fromApi = (await api('GET', '/v2/sandboxes')).json as unknown as Listed[];
    const byId = (a: Listed[]) => [...a].sort((x, y) => x.sandboxID.localeCompare(y.sandboxID));
    expect(byId(list)).toEqual(byId(fromApi));

    const mine = await aenvJson<Listed[]>(['ls', '--metadata', 'suite=cli', '--metadata', 'role=main']);
    expect(mine.map((s) => s.sandboxID)).toEqual([sandboxId]);
    expect(await aenvJson<Listed[]>(['ls', '--state', 'paused', '--metadata', 'suite=cli'])).toEqual([]);
    expect(await aenvJson<Listed[]>(['ls', '--limit', '1'])).toHaveLength(1);
  });

  it('prints a table with a stable header', async () => {
    const r = await aenv(['ls', '-o', 'table', '--metadata', 'suite=cli']);
    expect(r.code).toBe(0);
    const [header, row] = r.stdout.split('\n');
    expect(header!.split(/\s{2,}/)).toEqual([
      'SANDBOX ID',
      'TEMPLATE',
      'STATE',
      'CPU',
      'MEMORY',
      'STARTED',
      'ENDS',
      'METADATA',
    ]);
    expect(row).toMatch(
      new RegExp(`^${sandboxId}\\s+base\\s+running\\s+\\d+\\s+\\d+ MiB .* role=main,suite=cli$`),
    );
  });

  it('rejects bad options with exit code 2', async () => {
    const r = await aenv(['ls', '--state', 'bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown state "bogus"/);
    const t = await aenv(['start', 'base', '-d', '--timeout', '0']);
    expect(t.code).toBe(2);
  });

  it('fails clearly for an unknown template', async () => {
    const r = await aenv(['start', 'no-such-template-xyz', '-d']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^aenv: .*no-such-template-xyz/m);
  });
});

describe('exec', () => {
  it('streams stdout and stderr separately and exits with the remote code', async () => {
    const r = await aenv(['exec', sandboxId, '--', 'echo out; echo err >&2; exit 3']);
    expect(r).toMatchObject({ code: 3, stdout: 'out\n', stderr: 'err\n' });
    const ok = await aenv(['exec', sandboxId, '--', 'true']);
    expect(ok.code).toBe(0);
    const killed = await aenv(['exec', sandboxId, '--', 'kill -9 $$']);
    expect(killed.code).toBe(137);
    const slow = await aenv(['exec', sandboxId, '--timeout', '2', '--', 'sleep 30']);
    expect(slow.code).toBe(124);
    expect(slow.stderr).toMatch(/timed out after 2 s/);
  });

  it('quotes several arguments like an argv', async () => {
    const r = await aenv(['exec', sandboxId, '--', 'printf', '%s|', 'a b', '$HOME', "it's"]);
    expect(r.stdout).toBe("a b|$HOME|it's|");
  });

  it('forwards piped stdin, byte for byte, and closes it at the end', async () => {
    const hi = await aenv(['exec', sandboxId, '--', 'cat'], { input: 'hi\n' });
    expect(hi).toMatchObject({ code: 0, stdout: 'hi\n' });
    const data = randomBytes(3 << 20);
    const sum = await aenv(['exec', sandboxId, '--', 'sha256sum'], { input: data });
    expect(sum.stdout.split(' ')[0]).toBe(createHash('sha256').update(data).digest('hex'));
    const echoed = await aenv(['exec', sandboxId, '--', 'cat'], { input: data });
    expect(echoed.stdoutBytes.equals(data)).toBe(true);
  });

  it('takes a working directory, environment variables and a user', async () => {
    const r = await aenv([
      'exec',
      sandboxId,
      '--cwd',
      '/tmp',
      '-e',
      'FOO=bar baz',
      '-u',
      'root',
      '--',
      'echo "$FOO|$(pwd)|$(whoami)"',
    ]);
    expect(r.stdout).toBe('bar baz|/tmp|root\n');
    const def = await aenv(['exec', sandboxId, '--', 'whoami; pwd']);
    expect(def.stdout).toBe('user\n/home/user\n');
  });

  it('reports an unknown sandbox and a missing command', async () => {
    const r = await aenv(['exec', 'nosuchsandbox0000000', '--', 'true']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/not found/);
    const usage = await aenv(['exec', sandboxId]);
    expect(usage.code).toBe(2);
  });
});

/** Every file under `root` with its bytes and permission bits, by relative path. */
async function snapshotTree(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (rel: string) => {
    for (const name of (await readdir(path.join(root, rel))).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = await stat(path.join(root, r));
      if (st.isDirectory()) {
        out[`${r}/`] = 'dir';
        await walk(r);
      } else {
        const hash = createHash('sha256')
          .update(await readFile(path.join(root, r)))
          .digest('hex');
        out[r] = `${st.size}:${(st.mode & 0o777).toString(8)}:${hash}`;
      }
    }
  };
  await walk('');
  return out;
}

describe('upload and download', () => {
  it('round-trips a directory tree with binary files byte for byte', async () => {
    const src = path.join(work, 'tree');
    await mkdir(path.join(src, 'deep', 'er', 'est'), { recursive: true });
    await mkdir(path.join(src, 'empty'));
    await writeFile(path.join(src, 'zero.bin'), Buffer.alloc(0));
    await writeFile(path.join(src, 'one.bin'), Buffer.from([0]));
    await writeFile(path.join(src, 'deep', 'random.bin'), randomBytes(2_500_000));
    await writeFile(
      path.join(src, 'deep', 'er', 'est', 'all-bytes.bin'),
      Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
    );
    await writeFile(path.join(src, 'deep', 'er', 'name with spaces & ünïcode.txt'), 'text\r\nwith CRLF\n');
    await writeFile(path.join(src, 'run.sh'), '#!/bin/sh\necho ran\n');
    await chmod(path.join(src, 'run.sh'), 0o755);
    await writeFile(path.join(src, 'private.key'), randomBytes(64));
    await chmod(path.join(src, 'private.key'), 0o600);

    const up = await aenvJson<{ destination: string; files: number; bytes: number }>([
      'upload',
      sandboxId,
      src,
      '/home/user/',
    ]);
    expect(up).toMatchObject({ destination: '/home/user/tree', files: 7 });
    const ran = await aenv([
      'exec',
      sandboxId,
      '--',
      '/home/user/tree/run.sh && test -d /home/user/tree/empty',
    ]);
    expect(ran).toMatchObject({ code: 0, stdout: 'ran\n' });

    const dl = path.join(work, 'dl');
    await mkdir(dl);
    const down = await aenvJson<{ destination: string; files: number }>([
      'download',
      sandboxId,
      '/home/user/tree',
      dl,
    ]);
    expect(down).toMatchObject({ destination: path.join(dl, 'tree'), files: 7 });
    expect(await snapshotTree(path.join(dl, 'tree'))).toEqual(await snapshotTree(src));
    // Temp files never remain next to the results.
    expect(JSON.stringify(await snapshotTree(dl))).not.toMatch(/aenv-.*\.tmp/);
  });

  it('copies single files to a new name or into a directory', async () => {
    const file = path.join(work, 'single.bin');
    const data = randomBytes(100_000);
    await writeFile(file, data);
    await aenvJson(['upload', sandboxId, file, 'renamed.bin']);
    const check = await aenv(['exec', sandboxId, '--', 'sha256sum /home/user/renamed.bin']);
    expect(check.stdout.split(' ')[0]).toBe(createHash('sha256').update(data).digest('hex'));
    const into = path.join(work, 'into');
    await mkdir(into);
    const r = await aenvJson<{ destination: string }>(['download', sandboxId, 'renamed.bin', into]);
    expect(r.destination).toBe(path.join(into, 'renamed.bin'));
    expect((await readFile(path.join(into, 'renamed.bin'))).equals(data)).toBe(true);
  });

  it('reports missing sources', async () => {
    const remote = await aenv(['download', sandboxId, '/nope/missing', work]);
    expect(remote.code).toBe(1);
    expect(remote.stderr).toMatch(/no such file or directory/);
    const local = await aenv(['upload', sandboxId, path.join(work, 'missing'), '/tmp/x']);
    expect(local.code).toBe(1);
    expect(local.stderr).toMatch(/cannot read .*missing: ENOENT/);
  });
});

describe('lifecycle', () => {
  it('sets the timeout', async () => {
    const r = await aenvJson<{ endAt: string }>(['timeout', sandboxId, '15m']);
    const end = Date.parse(((await api('GET', `/sandboxes/${sandboxId}`)).json as unknown as Listed).endAt);
    expect(Date.parse(r.endAt)).toBe(end);
    expect(Math.abs(end - (Date.now() + 900_000))).toBeLessThan(15_000);
    const bad = await aenv(['timeout', sandboxId, 'later']);
    expect(bad.code).toBe(2);
  });

  it('pauses and resumes, with clear errors for the wrong state', async () => {
    const id = await startSandbox();
    expect(await aenvJson(['pause', id])).toEqual({ sandboxID: id, state: 'paused' });
    expect((await api('GET', `/sandboxes/${id}`)).json.state).toBe('paused');
    const again = await aenv(['pause', id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already paused/);
    const exec = await aenv(['exec', id, '--', 'true']);
    expect(exec.code).toBe(1);
    expect(exec.stderr).toMatch(/is paused[\s\S]*aenv resume/);

    expect(await aenvJson(['resume', id, '--timeout', '120'])).toEqual({
      sandboxID: id,
      state: 'running',
      resumed: true,
    });
    expect((await aenv(['exec', id, '--', 'echo back'])).stdout).toBe('back\n');
    expect(await aenvJson(['resume', id])).toMatchObject({ resumed: false });
  });

  it('resume --reboot boots a memory pause afresh, and pause --no-memory keeps files only', async () => {
    const id = await startSandbox();
    // A mark in memory only (a tmpfs, never captured), which a fresh start does not have, and a
    // file, which it keeps; one `aenv exec` reads both back.
    const setMark = () => aenv(['exec', id, '--', 'echo in-memory > /dev/shm/mark']);
    const markAndFile = async () =>
      (await aenv(['exec', id, '--', 'cat /dev/shm/mark 2>/dev/null || echo none; cat /home/user/kept.txt']))
        .stdout;
    await aenv(['exec', id, '--', 'echo in-memory > /dev/shm/mark; echo kept > /home/user/kept.txt']);
    await aenvJson(['pause', id]);
    expect(await aenvJson(['resume', id, '--reboot'])).toMatchObject({ resumed: true });
    expect(await markAndFile()).toBe('none\nkept\n');

    await setMark();
    expect(await aenvJson(['pause', id, '--no-memory'])).toEqual({ sandboxID: id, state: 'paused' });
    expect(await aenvJson(['resume', id])).toMatchObject({ resumed: true });
    expect(await markAndFile()).toBe('none\nkept\n');
  });

  it('kills sandboxes and reports unknown ones', async () => {
    const id = await startSandbox();
    expect(await aenvJson(['rm', id])).toEqual([{ sandboxID: id, killed: true }]);
    expect((await api('GET', `/sandboxes/${id}`)).status).toBe(404);
    const again = await aenv(['rm', id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/not found/);
  });
});

describe('fork and snapshots', () => {
  it('forks a running sandbox into children that share its state', async () => {
    await aenv(['exec', sandboxId, '--', 'echo parent-state > /home/user/marker']);
    const results = await aenvJson<{ sandbox?: { sandboxID: string } }[]>([
      'fork',
      sandboxId,
      '--count',
      '2',
    ]);
    expect(results).toHaveLength(2);
    const ids = results.map((r) => r.sandbox!.sandboxID);
    created.push(...ids);
    for (const id of ids)
      expect((await aenv(['exec', id, '--', 'cat /home/user/marker'])).stdout).toBe('parent-state\n');
    // Children carry the parent's metadata; several ids at once go away in one `rm`.
    const killed = await aenvJson<{ sandboxID: string; killed: boolean }[]>(['rm', ...ids]);
    expect(killed).toEqual(ids.map((sandboxID) => ({ sandboxID, killed: true })));
    const bad = await aenv(['fork', 'nosuchsandbox0000000']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/not found/);
  }, 300_000);

  it('snapshots a sandbox, lists it, starts from it and removes it', async () => {
    await aenv(['exec', sandboxId, '--', 'echo snap-state > /home/user/snap-marker']);
    const name = `cli-snap-${randomBytes(3).toString('hex')}`;
    const snap = await aenvJson<{ snapshotID: string; names: string[]; stored: boolean }>([
      'snapshot',
      'create',
      sandboxId,
      '--name',
      name,
      '--wait',
    ]);
    expect(snap.names).toContain(name);
    expect(snap.stored).toBe(true);
    const listed = await aenvJson<{ snapshotID: string }[]>(['snapshot', 'ls', '--sandbox-id', sandboxId]);
    expect(listed.map((s) => s.snapshotID)).toContain(snap.snapshotID);
    const table = await aenv(['snapshot', 'ls', '-o', 'table']);
    expect(table.stdout.split('\n')[0]!.split(/\s{2,}/)).toEqual([
      'SNAPSHOT ID',
      'NAMES',
      'SOURCE',
      'CPU',
      'MEMORY',
      'CREATED',
      'STORED',
    ]);

    const fromSnap = await aenvJson<{ sandboxID: string }>(['start', name, '-d']);
    created.push(fromSnap.sandboxID);
    expect((await aenv(['exec', fromSnap.sandboxID, '--', 'cat /home/user/snap-marker'])).stdout).toBe(
      'snap-state\n',
    );

    expect(await aenvJson(['template', 'rm', name])).toMatchObject({ deleted: true });
    const after = await aenvJson<{ snapshotID: string }[]>(['snapshot', 'ls']);
    expect(after.map((s) => s.snapshotID)).not.toContain(snap.snapshotID);
    const bad = await aenv(['snapshot', 'create', 'nosuchsandbox0000000']);
    expect(bad.code).toBe(1);
  }, 300_000);
});

describe('templates', () => {
  it('lists templates, the base template among them', async () => {
    const r = await aenv(['template', 'ls']);
    expect(r.code, r.stderr).toBe(0);
    const listed = JSON.parse(r.stdout) as { templateID: string }[];
    expect(listed.map((t) => t.templateID)).toContain('base');
  });

  it('pulls an image and builds a Dockerfile into templates, with live status', async () => {
    const reg = await startRegistry();
    try {
      const dir = await mkdtemp(path.join(work, 'build-'));
      const img = ociImage([await baseLayer(), await shellLayer()], { env: ['PATH=/bin', 'GREETING=hi'] });
      await writeLayout(path.join(dir, 'layout'), [
        { tag: 'img', top: img.manifest, blobs: imageBlobs(img) },
      ]);
      const ref = `${reg.host}/test/cli:1`;
      await skopeoPush(path.join(dir, 'layout'), 'img', ref);

      const pull = await aenv(['pull', ref, '--name', 'cli-pull']);
      expect(pull.code, pull.stderr).toBe(0);
      expect(JSON.parse(pull.stdout)).toMatchObject({ status: 'ready' });

      await writeFile(
        path.join(dir, 'Dockerfile'),
        `FROM ${ref}\nCOPY app.txt /app/\nRUN echo built > /app/built.txt\nENV MODE=cli\nCMD ["sleep", "3600"]\n`,
      );
      await writeFile(path.join(dir, 'app.txt'), 'app\n');
      const build = await aenv(['build', path.join(dir, 'Dockerfile'), '--name', 'cli-build']);
      expect(build.code, build.stderr).toBe(0);
      const names = (await aenvJson<{ names: string[] }[]>(['template', 'ls'])).map((t) => t.names[0]);
      expect(names).toEqual(expect.arrayContaining(['cli-pull', 'cli-build']));

      const created = await api('POST', '/sandboxes', { templateID: 'cli-build' });
      expect(created.status).toBe(201);
      const id = created.json.sandboxID as string;
      const r = await aenv(['exec', id, '--', 'cat /app/app.txt /app/built.txt; echo $MODE $GREETING; pwd']);
      expect(r.stdout).toBe('app\nbuilt\ncli hi\n/home/user\n');
      await api('DELETE', `/sandboxes/${id}`);

      const failing = await aenv(['pull', `${reg.host}/test/cli:missing`, '--name', 'cli-missing']);
      expect(failing.code).toBe(1);
      expect(failing.stderr).toMatch(/cli:missing/);
      for (const name of ['cli-pull', 'cli-build', 'cli-missing']) await aenv(['template', 'rm', name]);
      const badFile = await aenv(['build', path.join(dir, 'nope'), '--name', 'x']);
      expect(badFile.code).toBe(2);
    } finally {
      await reg.stop();
    }
  });
});

describe('shell completion', () => {
  it('completes commands and sandbox ids in bash', async () => {
    const bin = await mkdtemp(path.join(work, 'bin-'));
    await writeFile(path.join(bin, 'aenv'), `#!/bin/sh\nexec "${process.execPath}" "${AENV_BIN}" "$@"\n`, {
      mode: 0o755,
    });
    const run = (words: string[]) => {
      const script = `source <(aenv completion bash)
COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}
_aenv_complete; printf '%s\\n' "\${COMPREPLY[@]}"`;
      const r = spawnSync('bash', ['-c', script], {
        env: {
          ...process.env,
          PATH: `${bin}:${process.env.PATH}`,
          AENV_URL: URL_BASE,
          AENV_API_KEY: API_KEY,
        },
        encoding: 'utf8',
      });
      return r.stdout.split('\n').filter(Boolean);
    };
    expect(run(['aenv', 'sna'])).toEqual(['snapshot']);
    expect(run(['aenv', 'connect', ''])).toContain(sandboxId);
    expect(run(['aenv', 'rm', sandboxId.slice(0, 6)])).toContain(sandboxId);
    expect(run(['aenv', 'ls', '--st'])).toEqual(['--state']);
  });

  it('prints scripts for zsh and fish that their shells accept', async (ctx) => {
    for (const sh of ['zsh', 'fish']) {
      const r = await aenv(['completion', sh]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('aenv __complete --');
    }
    const shells = ['zsh', 'fish'].filter((s) => spawnSync('sh', ['-c', `command -v ${s}`]).status === 0);
    if (!shells.length) {
      console.log('skipped: zsh and fish are not installed, their scripts were not syntax-checked');
      ctx.skip('zsh/fish not installed');
    }
    for (const sh of shells) {
      const script = path.join(work, `completion.${sh}`);
      await writeFile(script, (await aenv(['completion', sh])).stdout);
      expect(spawnSync(sh, ['-n', script]).status).toBe(0);
    }
  });
});

describe('single-file build', () => {
  it('bundles into one .mjs that runs without node_modules', async () => {
    const out = path.join(work, 'standalone', 'aenv.mjs');
    const b = spawnSync(
      process.execPath,
      [path.join(path.dirname(AENV_BIN), '..', 'scripts', 'bundle.mjs'), out],
      {
        encoding: 'utf8',
      },
    );
    expect(b.status, b.stderr).toBe(0);
    const pkg = JSON.parse(
      await readFile(path.join(path.dirname(AENV_BIN), '..', 'package.json'), 'utf8'),
    ) as { version: string };
    expect((await aenv(['--version'], { bin: out })).stdout.trim()).toBe(pkg.version);
    const list = await aenvJson<Listed[]>(['ls', '--metadata', 'suite=cli'], { bin: out });
    expect(list.map((s) => s.sandboxID)).toContain(sandboxId);
    const r = await aenv(['exec', sandboxId, '--', 'cat'], { bin: out, input: 'bundled\n' });
    expect(r.stdout).toBe('bundled\n');
  });
});
