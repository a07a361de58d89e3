import { chmod, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { FilesystemEventType, Sandbox, type FilesystemEvent } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { ENVD_URL, type EnvdProcess, initEnvd, startEnvdProcess } from '@agentenv/test-support/envd';

/** How streams end and what they carry, compared with E2B's envd. */
let envd: EnvdProcess;
let sbx: Sandbox;
let base: string;

beforeAll(async () => {
  envd = await startEnvdProcess();
  expect((await initEnvd({})).status).toBe(204);
  sbx = await Sandbox.create();
  base = await mkdtemp('/tmp/aenv-parity-e2e-');
});

afterAll(async () => {
  await envd?.stop();
  if (base) await rm(base, { recursive: true, force: true });
});

interface StreamEnd {
  /** The messages before the end, as JSON. */
  messages: Record<string, unknown>[];
  /** The Connect end-of-stream message. */
  end: { error?: { code: string; message?: string } };
}

/** A server-streaming Connect call with the JSON codec, read to its end-of-stream message. */
async function streamCall(
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<StreamEnd> {
  const json = Buffer.from(JSON.stringify(body));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(json.length, 1);
  const r = await fetch(`${ENVD_URL}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/connect+json', ...headers },
    body: Buffer.concat([head, json]),
  });
  expect(r.status).toBe(200);
  const buf = Buffer.from(await r.arrayBuffer());
  const messages: Record<string, unknown>[] = [];
  for (let at = 0; at + 5 <= buf.length;) {
    const flags = buf.readUInt8(at);
    const len = buf.readUInt32BE(at + 1);
    const payload = JSON.parse(buf.subarray(at + 5, at + 5 + len).toString()) as Record<string, unknown>;
    at += 5 + len;
    if (flags & 0x02) return { messages, end: payload };
    messages.push(payload);
  }
  throw new Error('the stream ended without an end-of-stream message');
}

/** A Start as the SDK sends it (stdin not kept open). */
const start = (cmd: string, headers: Record<string, string> = {}) =>
  streamCall(
    '/process.Process/Start',
    { process: { cmd: '/bin/bash', args: ['-c', cmd] }, stdin: false },
    headers,
  );
const events = (s: StreamEnd) => s.messages.map((m) => (m.event ?? {}) as Record<string, unknown>);
const endEvents = (s: StreamEnd) => events(s).filter((e) => 'end' in e);

describe('how a process stream ends', () => {
  it('past its deadline: deadline_exceeded and no end event; the process is killed', async () => {
    const s = await start('sleep 30 # parity-timeout', { 'connect-timeout-ms': '1000' });
    expect(events(s)[0]).toHaveProperty('start');
    expect(endEvents(s)).toEqual([]);
    expect(s.end.error?.code).toBe('deadline_exceeded');
    await eventually(async () => {
      const left = (await sbx.commands.list()).filter((p) => p.args.join(' ').includes('parity-timeout'));
      expect(left).toEqual([]);
    });
  });

  it('on exit: the end event with the exit code, then a clean end', async () => {
    const s = await start('echo out; exit 3');
    expect(endEvents(s)).toEqual([
      { end: { exitCode: 3, exited: true, status: 'exit status 3', error: 'exit status 3' } },
    ]);
    expect(s.end).toEqual({});
  });

  it('on a kill or a signal: the end event saying which, then a clean end', async () => {
    for (const [signal, word] of [
      ['SIGKILL', 'killed'],
      ['SIGTERM', 'terminated'],
    ] as const) {
      const ended = start(`echo ready; sleep 30 # parity-${signal}`);
      const proc = await eventually(async () => {
        const p = (await sbx.commands.list()).find((x) => x.args.join(' ').includes(`parity-${signal}`));
        expect(p).toBeDefined();
        return p!;
      });
      const r = await fetch(`${ENVD_URL}/process.Process/SendSignal`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ process: { pid: proc.pid }, signal: `SIGNAL_${signal}` }),
      });
      expect(r.status).toBe(200);
      const s = await ended;
      expect(endEvents(s)).toEqual([
        { end: { exitCode: -1, status: `signal: ${word}`, error: `signal: ${word}` } },
      ]);
      expect(s.end).toEqual({});
    }
  });

  it('when a watch passes its deadline: deadline_exceeded', async () => {
    const s = await streamCall(
      '/filesystem.Filesystem/WatchDir',
      { path: base },
      { 'connect-timeout-ms': '500' },
    );
    expect(s.messages).toEqual([{ start: {} }]);
    expect(s.end.error?.code).toBe('deadline_exceeded');
  });
});

describe('signed uploads of a part without a file name to a relative path', () => {
  const TOKEN = 'parity-e2e-token';

  it('answer the entries written, for the default user and for root', async () => {
    expect((await initEnvd({ accessToken: TOKEN, defaultUser: 'user' })).status).toBe(204);
    const secured = new Sandbox({
      sandboxId: 'debug_sandbox_id',
      envdVersion: '99.99.99',
      envdAccessToken: TOKEN,
      debug: true,
    });
    const name = `parity-${process.pid}.txt`;
    try {
      for (const [user, home] of [
        [undefined, '/home/user'],
        ['root', '/root'],
      ] as const) {
        const url = await secured.uploadUrl(name, user ? { user } : {});
        const form = new FormData();
        form.append('file', 'file content');
        const r = await fetch(url, { method: 'POST', body: form });
        expect(r.status).toBe(200);
        expect(await r.json()).toEqual([{ name, path: `${home}/${name}`, type: 'file' }]);
        expect(await readFile(`${home}/${name}`, 'utf8')).toBe('file content');
        expect((await stat(`${home}/${name}`)).uid).toBe(
          user === 'root' ? 0 : (await stat('/home/user')).uid,
        );
      }
    } finally {
      await rm(`/home/user/${name}`, { force: true });
      await rm(`/root/${name}`, { force: true });
      expect((await initEnvd({ accessToken: '', defaultUser: 'root' }, TOKEN)).status).toBe(204);
    }
  });
});

describe('watch event sequences', () => {
  /** Collects a watch's events; `step` returns those one action caused, in order. */
  async function watch(dir: string, recursive: boolean) {
    const seen: FilesystemEvent[] = [];
    const handle = await sbx.files.watchDir(dir, (e) => void seen.push(e), { recursive });
    let marks = 0;
    const step = async (run: () => Promise<unknown>): Promise<string[]> => {
      const from = seen.length;
      await run();
      // Everything the action caused is reported before a file made after it.
      const mark = `mark-${marks++}`;
      await sbx.files.write(`${dir}/${mark}`, '');
      await eventually(() => expect(seen.some((e) => e.name === mark)).toBe(true), { intervalMs: 10 });
      const end = seen.findIndex((e) => e.name === mark);
      return seen.slice(from, end).map((e) => `${e.type} ${e.name}`);
    };
    return { step, stop: () => handle.stop() };
  }
  const { CREATE, WRITE, CHMOD, RENAME, REMOVE } = FilesystemEventType;

  it('reports create, write, overwrite, chmod, rename and remove as E2B envd does', async () => {
    const d = `${base}/flat`;
    await sbx.files.makeDir(d);
    const w = await watch(d, false);
    try {
      expect(await w.step(() => sbx.files.write(`${d}/f.txt`, 'one'))).toEqual([
        `${CREATE} f.txt`,
        `${CHMOD} f.txt`,
        `${WRITE} f.txt`,
      ]);
      // The owner is set, then the file truncated and written: two IN_MODIFY, one when read
      // together (as in E2B's envd).
      const over = await w.step(() => sbx.files.write(`${d}/f.txt`, 'two'));
      expect(over[0]).toBe(`${CHMOD} f.txt`);
      expect(over.length).toBeGreaterThan(1);
      expect(new Set(over.slice(1))).toEqual(new Set([`${WRITE} f.txt`]));
      expect(await w.step(() => chmod(`${d}/f.txt`, 0o600))).toEqual([`${CHMOD} f.txt`]);
      expect(await w.step(() => sbx.files.rename(`${d}/f.txt`, `${d}/g.txt`))).toEqual([
        `${RENAME} f.txt`,
        `${CREATE} g.txt`,
      ]);
      expect(await w.step(() => sbx.files.remove(`${d}/g.txt`))).toEqual([`${REMOVE} g.txt`]);
    } finally {
      await w.stop();
    }
  });

  it('reports a new file in a nested directory of a recursive watch as CREATE, then its changes', async () => {
    const d = `${base}/recursive`;
    await mkdir(`${d}/nested`, { recursive: true });
    const w = await watch(d, true);
    try {
      expect(await w.step(() => sbx.files.write(`${d}/nested/f.txt`, 'content'))).toEqual([
        `${CREATE} nested/f.txt`,
        `${CHMOD} nested/f.txt`,
        `${WRITE} nested/f.txt`,
      ]);
    } finally {
      await w.stop();
    }
  });
});
