import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { eventually, pidAlive } from '@agentenv/test-support';
import { ProcessSpawner, SPAWNER_MAIN } from '../../src/util/spawner/client.js';
import { parseReply, parseRequest } from '../../src/util/spawner/protocol.js';
import { launchProcessesWith, runProcess } from '../../src/util/subprocess.js';

if (!existsSync(SPAWNER_MAIN)) throw new Error(`${SPAWNER_MAIN} is not built: run npm run build first`);

describe('process spawner protocol', () => {
  it('accepts runs and cancels, and says what is wrong with anything else', () => {
    expect(parseRequest('{"id":1,"file":"/bin/true","args":[]}')).toEqual({
      id: 1,
      file: '/bin/true',
      args: [],
    });
    expect(parseRequest('{"id":2,"cancel":true}')).toEqual({ id: 2, cancel: true });
    expect(parseRequest('nope')).toBe('not JSON');
    expect(parseRequest('{"file":"x","args":[]}')).toBe('no numeric id');
    expect(parseRequest('{"id":1,"file":"x","args":[1]}')).toMatch(/string args/);
    expect(parseRequest('{"id":1,"file":"x","args":[],"timeoutMs":"5"}')).toMatch(/numbers/);
    expect(parseRequest('{"id":1,"file":"x","args":[],"env":{"A":1}}')).toMatch(/env/);
    expect(parseReply('{"id":1,"result":{}}')).toEqual({ id: 1, result: {} });
    expect(parseReply('{"id":1}')).toBeUndefined();
    expect(parseReply('garbage')).toBeUndefined();
  });
});

describe('process spawner', () => {
  const spawner = new ProcessSpawner();
  afterEach(() => launchProcessesWith(undefined));
  afterAll(() => spawner.close());

  it('runs a program to completion with its input, output and exit code', async () => {
    const r = await spawner.run('/bin/sh', ['-c', 'cat; echo oops >&2; exit 3'], { input: 'hello' });
    expect(r).toEqual({
      code: 3,
      signal: null,
      stdout: 'hello',
      stderr: 'oops\n',
      timedOut: false,
      outputExceeded: false,
    });
    const env = await spawner.run('/bin/sh', ['-c', 'echo "$AENV_X"'], {
      env: { PATH: '/bin', AENV_X: 'y' },
    });
    expect(env.stdout).toBe('y\n');
  });

  it('rejects a program that cannot be started with its errno, as a spawn here does', async () => {
    await expect(spawner.run('/nonexistent/prog', [])).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('enforces timeouts and output limits, and stops a run whose signal aborts', async () => {
    expect(await spawner.run('/bin/sleep', ['10'], { timeoutMs: 50 })).toMatchObject({
      timedOut: true,
      signal: 'SIGKILL',
    });
    expect(await spawner.run('/usr/bin/yes', [], { maxOutputBytes: 4096 })).toMatchObject({
      outputExceeded: true,
    });
    const abort = new AbortController();
    const run = spawner.run('/bin/sleep', ['10'], { signal: abort.signal });
    setTimeout(() => abort.abort(), 50);
    expect(await run).toMatchObject({ signal: 'SIGTERM', timedOut: false });
    const early = new AbortController();
    early.abort();
    expect(await spawner.run('/bin/sleep', ['10'], { signal: early.signal })).toMatchObject({
      signal: 'SIGTERM',
    });
  });

  it('keeps many runs at once apart', async () => {
    const runs = Array.from({ length: 40 }, (_, i) => spawner.run('/bin/echo', [`run ${i}`]));
    expect((await Promise.all(runs)).map((r) => r.stdout)).toEqual(runs.map((_, i) => `run ${i}\n`));
  });

  it('is where runProcess starts programs once installed, except runs that stream their output', async () => {
    const parentOf = async (opts: Parameters<typeof runProcess>[2] = {}) => {
      const lines: string[] = [];
      const r = await runProcess('/bin/sh', ['-c', 'echo $PPID'], {
        ...opts,
        ...(opts.onLine ? { onLine: (l) => lines.push(l) } : {}),
      });
      return Number(opts.onLine ? lines[0] : r.stdout);
    };
    expect(await parentOf()).toBe(process.pid);
    launchProcessesWith(spawner);
    expect(await parentOf()).toBe(spawner.pid);
    expect(await parentOf({ onLine: () => undefined })).toBe(process.pid);
  });

  it('rejects the runs of a helper that died, and starts a new one for the next run', async () => {
    await spawner.run('/bin/true', []);
    const first = spawner.pid!;
    const run = spawner.run('/bin/sleep', ['10']);
    process.kill(first, 'SIGKILL');
    await expect(run).rejects.toThrow(/process spawner exited \(SIGKILL\)/);
    expect((await spawner.run('/bin/echo', ['again'])).stdout).toBe('again\n');
    expect(spawner.pid).not.toBe(first);
  });

  it('close() stops what runs, ends the helper and refuses later runs', async () => {
    const own = new ProcessSpawner();
    const run = own.run('/bin/sleep', ['10']);
    const pid = own.pid!;
    await own.close();
    expect(await run).toMatchObject({ signal: 'SIGTERM' });
    expect(pidAlive(pid)).toBe(false);
    await expect(own.run('/bin/true', [])).rejects.toThrow(/closed/);
  });

  it('never outlives the process that started it', async () => {
    // A parent that starts a long run through its own spawner, reports the helper's pid and dies.
    const script = `
      import { ProcessSpawner } from ${JSON.stringify(new URL('../../dist/util/index.js', import.meta.url).href)};
      const s = new ProcessSpawner();
      void s.run('/bin/sleep', ['30']);
      setTimeout(() => { console.log(s.pid); process.kill(process.pid, 'SIGKILL'); }, 200);
    `;
    const parent = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    parent.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await new Promise((resolve) => parent.once('close', resolve));
    const helper = Number(out.trim());
    expect(helper).toBeGreaterThan(0);
    await eventually(() => expect(pidAlive(helper)).toBe(false), { timeoutMs: 10_000 });
  });
});
