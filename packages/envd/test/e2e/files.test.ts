import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink } from 'node:fs/promises';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import * as xattr from '@napi-rs/xattr';
import {
  AuthenticationError,
  FileNotFoundError,
  FilesystemEventType,
  InvalidArgumentError,
  NotEnoughSpaceError,
  Sandbox,
  type FilesystemEvent,
} from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileSignature } from '../../src/file-signature.js';
import { eventually } from '@agentenv/test-support';
import { ENVD_URL, type EnvdProcess, initEnvd, startEnvdProcess } from '@agentenv/test-support/envd';

let envd: EnvdProcess;
let sbx: Sandbox;
/** A fresh directory for this run; everything the tests write goes under it. */
let base: string;
let userIds: { uid: number; gid: number };

/** How many inotify watches envd holds (one per watched directory). */
async function inotifyWatches(): Promise<number> {
  const dir = `/proc/${envd.child.pid}/fdinfo`;
  let n = 0;
  for (const fd of await readdir(dir)) {
    const info = await readFile(`${dir}/${fd}`, 'utf8').catch(() => '');
    n += info.split('\n').filter((l) => l.startsWith('inotify wd:')).length;
  }
  return n;
}

/** A Connect unary call with the JSON codec. */
async function connectCall(
  method: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${ENVD_URL}/filesystem.Filesystem/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  envd = await startEnvdProcess();
  expect((await initEnvd({})).status).toBe(204);
  sbx = await Sandbox.create();
  base = await mkdtemp('/tmp/aenv-files-e2e-');
  const [uid, gid] = execFileSync('sh', ['-c', 'echo $(id -u user) $(id -g user)'])
    .toString()
    .trim()
    .split(' ');
  userIds = { uid: Number(uid), gid: Number(gid) };
});

afterAll(async () => {
  await envd?.stop();
  if (base) await rm(base, { recursive: true, force: true });
  await rm('/home/user/aenv-files-e2e', { recursive: true, force: true });
});

describe('sbx.files read and write', () => {
  it('writes and reads text, bytes, blobs and streams', async () => {
    const p = `${base}/rw/hello.txt`;
    const info = await sbx.files.write(p, 'Hello, world!');
    expect(info).toEqual({ name: 'hello.txt', path: p, type: 'file', metadata: undefined });
    expect(await sbx.files.read(p)).toBe('Hello, world!');

    const bytes = randomBytes(100_000);
    await sbx.files.write(`${base}/rw/bytes.bin`, new Uint8Array(bytes));
    const back = await sbx.files.read(`${base}/rw/bytes.bin`, { format: 'bytes' });
    expect(Buffer.from(back).equals(bytes)).toBe(true);

    const blob = await sbx.files.read(p, { format: 'blob' });
    expect(await blob.text()).toBe('Hello, world!');

    const stream = await sbx.files.read(`${base}/rw/bytes.bin`, { format: 'stream' });
    const chunks: Uint8Array[] = [];
    for await (const c of stream) chunks.push(c);
    expect(Buffer.concat(chunks).equals(bytes)).toBe(true);

    await sbx.files.write(`${base}/rw/empty.txt`, '');
    expect(await sbx.files.read(`${base}/rw/empty.txt`)).toBe('');
    expect(await sbx.files.read(`${base}/rw/empty.txt`, { format: 'bytes' })).toEqual(new Uint8Array(0));
  });

  it('overwrites in place and truncates', async () => {
    const p = `${base}/rw/over.txt`;
    await sbx.files.write(p, 'a much longer first version');
    await sbx.files.write(p, 'short');
    expect(await readFile(p, 'utf8')).toBe('short');
  });

  it('streams uploads (octet-stream) without buffering them', async () => {
    const chunk = randomBytes(64 * 1024);
    const count = 80; // 5 MiB
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (this.sent === count) return controller.close();
        this.sent = (this.sent ?? 0) + 1;
        controller.enqueue(new Uint8Array(chunk));
      },
    } as UnderlyingDefaultSource<Uint8Array> & { sent?: number });
    const p = `${base}/rw/streamed.bin`;
    const info = await sbx.files.write(p, body);
    expect(info.path).toBe(p);
    expect((await stat(p)).size).toBe(count * chunk.length);
  });

  it('writes and reads gzip-encoded', async () => {
    const p = `${base}/gz/data.txt`;
    const content = 'compress me '.repeat(10_000);
    await sbx.files.write(p, content, { gzip: true });
    expect(await readFile(p, 'utf8')).toBe(content);
    expect(await sbx.files.read(p, { gzip: true })).toBe(content);
    const raw = await fetch(`${ENVD_URL}/files?path=${encodeURIComponent(p)}`, {
      headers: { 'accept-encoding': 'gzip' },
    });
    expect(raw.headers.get('content-encoding')).toBe('gzip');
    expect(await raw.text()).toBe(content);
  });

  it('writes many files in one request with writeFiles', async () => {
    const files = Array.from({ length: 25 }, (_, i) => ({
      path: `${base}/many/${i % 5}/file-${i}.txt`,
      data: `content ${i}`,
    }));
    const infos = await sbx.files.writeFiles(files);
    expect(infos.map((i) => i.path)).toEqual(files.map((f) => f.path));
    for (const f of files) expect(await readFile(f.path, 'utf8')).toBe(f.data);
    expect(await sbx.files.writeFiles([])).toEqual([]);
  });

  it('fails to read what is missing or a directory', async () => {
    await expect(sbx.files.read(`${base}/nope.txt`)).rejects.toThrow(FileNotFoundError);
    await expect(sbx.files.read(base)).rejects.toThrow(InvalidArgumentError);
    await expect(sbx.files.write(base, 'x')).rejects.toThrow(InvalidArgumentError);
  });
});

describe('sbx.files metadata', () => {
  it('stores metadata from the upload and shows it everywhere', async () => {
    const p = `${base}/meta/tagged.txt`;
    const metadata = { author: 'mish', purpose: 'upload' };
    const info = await sbx.files.write(p, 'content', { metadata });
    expect(info.metadata).toEqual(metadata);
    expect((await sbx.files.getInfo(p)).metadata).toEqual(metadata);
    expect(String(await xattr.getAttribute(p, 'user.e2b.author'))).toBe('mish');
    const listed = await sbx.files.list(`${base}/meta`);
    expect(listed.find((e) => e.name === 'tagged.txt')?.metadata).toEqual(metadata);

    const octet = await sbx.files.write(`${base}/meta/octet.txt`, 'x', { metadata, useOctetStream: true });
    expect(octet.metadata).toEqual(metadata);

    const moved = await sbx.files.rename(p, `${base}/meta/renamed.txt`);
    expect(moved.metadata).toEqual(metadata);

    const multi = await sbx.files.writeFiles(
      [
        { path: `${base}/meta/m1`, data: '1' },
        { path: `${base}/meta/m2`, data: '2' },
      ],
      { metadata: { source: 'suite' } },
    );
    expect(multi.map((m) => m.metadata)).toEqual([{ source: 'suite' }, { source: 'suite' }]);
  });

  it('clears stale metadata on overwrite and shows attributes set in the sandbox', async () => {
    const p = `${base}/meta/over.txt`;
    await sbx.files.write(p, 'first', { metadata: { author: 'mish' } });
    const info = await sbx.files.write(p, 'second');
    expect(info.metadata).toBeUndefined();
    expect((await sbx.files.getInfo(p)).metadata).toBeUndefined();
    await xattr.setAttribute(p, 'user.e2b.author', 'setfattr');
    expect((await sbx.files.getInfo(p)).metadata).toEqual({ author: 'setfattr' });
  });

  it('refuses invalid metadata sent past the SDK', async () => {
    const p = `${base}/meta/invalid.txt`;
    const r = await fetch(`${ENVD_URL}/files?path=${encodeURIComponent(p)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', 'x-metadata-k': 'v'.repeat(5000) },
      body: 'x',
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { message: string }).message).toMatch(/invalid metadata/);
    expect(await sbx.files.exists(p)).toBe(false);
  });
});

describe('sbx.files directory operations', () => {
  it('lists at depth 1 and 2 in lexical pre-order', async () => {
    const d = `${base}/list`;
    await sbx.files.write(`${d}/b.txt`, 'b');
    await sbx.files.write(`${d}/a/inner.txt`, 'i');
    await sbx.files.write(`${d}/a/deeper/x.txt`, 'x');
    const one = await sbx.files.list(d);
    expect(one.map((e) => [e.name, e.type])).toEqual([
      ['a', 'dir'],
      ['b.txt', 'file'],
    ]);
    const two = await sbx.files.list(d, { depth: 2 });
    expect(two.map((e) => path.relative(d, e.path))).toEqual(['a', 'a/deeper', 'a/inner.txt', 'b.txt']);
    expect(two[2]).toMatchObject({
      name: 'inner.txt',
      type: 'file',
      size: 1,
      mode: 0o644,
      permissions: '-rw-r--r--',
    });
    await expect(sbx.files.list(`${d}/b.txt`)).rejects.toThrow(InvalidArgumentError);
    await expect(sbx.files.list(`${d}/missing`)).rejects.toThrow(FileNotFoundError);
  });

  it('checks existence and describes files, directories and symlinks', async () => {
    const d = `${base}/info`;
    await sbx.files.write(`${d}/f.txt`, 'test');
    await symlink(`${d}/f.txt`, `${d}/link`);
    expect(await sbx.files.exists(`${d}/f.txt`)).toBe(true);
    expect(await sbx.files.exists(`${d}/missing`)).toBe(false);

    const f = await sbx.files.getInfo(`${d}/f.txt`);
    expect(f).toMatchObject({ name: 'f.txt', type: 'file', path: `${d}/f.txt`, size: 4, mode: 0o644 });
    expect(f).toMatchObject({ permissions: '-rw-r--r--', owner: 'root', group: 'root' });
    expect(f.modifiedTime).toBeInstanceOf(Date);
    expect(Math.abs(f.modifiedTime!.getTime() - Date.now())).toBeLessThan(60_000);

    const dir = await sbx.files.getInfo(d);
    expect(dir).toMatchObject({ name: 'info', type: 'dir', mode: 0o755, permissions: 'drwxr-xr-x' });
    expect(dir.size).toBeGreaterThan(0);

    const link = await sbx.files.getInfo(`${d}/link`);
    expect(link).toMatchObject({ name: 'link', symlinkTarget: `${d}/f.txt`, permissions: 'Lrwxrwxrwx' });
    await expect(sbx.files.getInfo(`${d}/missing`)).rejects.toThrow(FileNotFoundError);
  });

  it('makes directories (true, then false), renames and removes', async () => {
    const d = `${base}/ops/x/y`;
    expect(await sbx.files.makeDir(d)).toBe(true);
    expect(await sbx.files.makeDir(d)).toBe(false);
    await sbx.files.write(`${base}/ops/file`, 'f');
    await expect(sbx.files.makeDir(`${base}/ops/file`)).rejects.toThrow(InvalidArgumentError);
    await expect(sbx.files.makeDir(`${base}/ops/file/sub`)).rejects.toThrow(InvalidArgumentError);

    const moved = await sbx.files.rename(`${base}/ops/file`, `${base}/ops/new/parent/file2`);
    expect(moved).toMatchObject({ name: 'file2', path: `${base}/ops/new/parent/file2`, type: 'file' });
    expect(await sbx.files.exists(`${base}/ops/file`)).toBe(false);
    await expect(sbx.files.rename(`${base}/ops/missing`, `${base}/ops/other`)).rejects.toThrow(
      FileNotFoundError,
    );

    await sbx.files.remove(`${base}/ops/x`);
    expect(await sbx.files.exists(`${base}/ops/x`)).toBe(false);
    // Like E2B's envd (rm -rf): removing what is not there succeeds.
    await sbx.files.remove(`${base}/ops/x`);
  });
});

describe('sbx.files users and ownership', () => {
  it('acts as the requested user: home-relative paths, ownership of files and new directories', async () => {
    const info = await sbx.files.write('aenv-files-e2e/sub/owned.txt', 'mine', { user: 'user' });
    expect(info.path).toBe('/home/user/aenv-files-e2e/sub/owned.txt');
    for (const p of ['/home/user/aenv-files-e2e', '/home/user/aenv-files-e2e/sub', info.path]) {
      const st = await stat(p);
      expect([st.uid, st.gid]).toEqual([userIds.uid, userIds.gid]);
    }
    const got = await sbx.files.getInfo('aenv-files-e2e/sub/owned.txt', { user: 'user' });
    expect(got).toMatchObject({ owner: 'user', group: 'user' });
    expect(await sbx.files.makeDir('aenv-files-e2e/made', { user: 'user' })).toBe(true);
    expect((await stat('/home/user/aenv-files-e2e/made')).uid).toBe(userIds.uid);

    const rootFile = await sbx.files.write(`${base}/owned-by-root.txt`, 'r', { user: 'root' });
    expect((await stat(rootFile.path)).uid).toBe(0);
    // Overwriting hands the file to the writer, as E2B's envd does.
    await sbx.files.write(`${base}/owned-by-root.txt`, 'u', { user: 'user' });
    expect((await stat(rootFile.path)).uid).toBe(userIds.uid);

    await expect(sbx.files.write(`${base}/x`, 'x', { user: 'no-such-user' })).rejects.toThrow(
      AuthenticationError,
    );
    await expect(sbx.files.list(base, { user: 'no-such-user' })).rejects.toThrow(/invalid username/);
  });
});

describe('sbx.files.watchDir', () => {
  it('reports events with relative names, recursively, including new subdirectories', async () => {
    const d = `${base}/watch`;
    await sbx.files.makeDir(`${d}/existing`);
    const events: FilesystemEvent[] = [];
    const handle = await sbx.files.watchDir(d, (e) => void events.push(e), {
      recursive: true,
      includeEntry: true,
    });
    const waitFor = (type: FilesystemEventType, name: string) =>
      eventually(
        () => {
          const e = events.find((x) => x.type === type && x.name === name);
          if (e) return e;
          throw new Error(`no ${type} ${name}; got ${events.map((x) => `${x.type} ${x.name}`).join(', ')}`);
        },
        { intervalMs: 10 },
      );

    await sbx.files.write(`${d}/existing/a.txt`, 'a');
    const created = await waitFor(FilesystemEventType.CREATE, 'existing/a.txt');
    expect(created.entry).toMatchObject({ name: 'a.txt', path: `${d}/existing/a.txt`, type: 'file' });

    await sbx.files.makeDir(`${d}/nested`);
    await waitFor(FilesystemEventType.CREATE, 'nested');
    await sbx.files.write(`${d}/nested/b.txt`, 'b');
    const written = await waitFor(FilesystemEventType.WRITE, 'nested/b.txt');
    expect(written.entry?.path).toBe(`${d}/nested/b.txt`);

    await sbx.files.rename(`${d}/nested/b.txt`, `${d}/nested/c.txt`);
    await waitFor(FilesystemEventType.RENAME, 'nested/b.txt');
    await waitFor(FilesystemEventType.CREATE, 'nested/c.txt');
    await sbx.files.remove(`${d}/nested/c.txt`);
    const removed = await waitFor(FilesystemEventType.REMOVE, 'nested/c.txt');
    expect(removed.entry).toBeUndefined();
    expect(await inotifyWatches()).toBe(3); // watch, watch/existing, watch/nested
    await handle.stop();

    // The client went away: every watch is released, so nothing more can be reported.
    await eventually(async () => expect(await inotifyWatches()).toBe(0));
    const count = events.length;
    await sbx.files.write(`${d}/after-stop.txt`, 'x');
    expect(events.length).toBe(count);
  });

  it('sends the start event at once and keepalives per Keepalive-Ping-Interval', async () => {
    const json = Buffer.from(JSON.stringify({ path: base }));
    const head = Buffer.alloc(5);
    head.writeUInt32BE(json.length, 1);
    const abort = new AbortController();
    const r = await fetch(`${ENVD_URL}/filesystem.Filesystem/WatchDir`, {
      method: 'POST',
      headers: { 'content-type': 'application/connect+json', 'keepalive-ping-interval': '1' },
      body: Buffer.concat([head, json]),
      signal: abort.signal,
    });
    expect(r.status).toBe(200);
    const reader = r.body!.getReader();
    let buf = Buffer.alloc(0);
    const messages: string[] = [];
    const started = Date.now();
    while (messages.length < 2 && Date.now() - started < 5000) {
      const { value, done } = await reader.read();
      if (done) break;
      buf = Buffer.concat([buf, value]);
      while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
        const len = buf.readUInt32BE(1);
        messages.push(buf.subarray(5, 5 + len).toString());
        buf = buf.subarray(5 + len);
      }
    }
    expect(messages).toEqual(['{"start":{}}', '{"keepalive":{}}']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    abort.abort();
    await eventually(async () => expect(await inotifyWatches()).toBe(0));
  });

  it('buffers events for the polling watcher RPCs', async () => {
    const d = `${base}/poll`;
    await sbx.files.makeDir(d);
    const created = await connectCall('CreateWatcher', { path: d, recursive: true });
    expect(created.status).toBe(200);
    const watcherId = created.body.watcherId as string;
    await sbx.files.write(`${d}/polled.txt`, 'x');
    const events: { name: string; type: string }[] = [];
    await eventually(
      async () => {
        const got = await connectCall('GetWatcherEvents', { watcherId });
        expect(got.status).toBe(200);
        events.push(...((got.body.events as typeof events | undefined) ?? []));
        expect(events).toContainEqual({ name: 'polled.txt', type: 'EVENT_TYPE_CREATE' });
      },
      { intervalMs: 20 },
    );
    expect((await connectCall('RemoveWatcher', { watcherId })).status).toBe(200);
    expect(await inotifyWatches()).toBe(0);
    const gone = await connectCall('GetWatcherEvents', { watcherId });
    expect(gone.status).toBe(404);
    expect(gone.body.code).toBe('not_found');
    expect((await connectCall('RemoveWatcher', { watcherId })).body.code).toBe('not_found');
    expect((await connectCall('CreateWatcher', { path: `${d}/missing` })).body.code).toBe('not_found');
  });

  it('watches one level without recursive, and refuses files and missing directories', async () => {
    const d = `${base}/watch-flat`;
    await sbx.files.makeDir(`${d}/sub`);
    const events: FilesystemEvent[] = [];
    const handle = await sbx.files.watchDir(d, (e) => void events.push(e));
    await sbx.files.write(`${d}/sub/deep.txt`, 'x');
    await sbx.files.write(`${d}/top.txt`, 'x');
    // deep.txt was written first: had it been reported, it would be there by top.txt's WRITE.
    await eventually(
      () =>
        expect(events.some((e) => e.name === 'top.txt' && e.type === FilesystemEventType.WRITE)).toBe(true),
      { intervalMs: 10 },
    );
    expect(events.some((e) => e.name.includes('deep'))).toBe(false);
    expect(events.every((e) => e.entry === undefined)).toBe(true);
    await handle.stop();

    await expect(sbx.files.watchDir(`${d}/missing`, () => {})).rejects.toThrow(FileNotFoundError);
    await expect(sbx.files.watchDir(`${d}/top.txt`, () => {})).rejects.toThrow(InvalidArgumentError);
  });
});

describe('signed URLs and access tokens', () => {
  const TOKEN = 'files-e2e-token';
  /** The SDK's debug-mode client of envd, sending the access token. */
  const securedSandbox = () =>
    new Sandbox({
      sandboxId: 'debug_sandbox_id',
      envdVersion: '99.99.99',
      envdAccessToken: TOKEN,
      debug: true,
    });

  it('accepts the token or a valid signature, and explains refusals', async () => {
    expect((await initEnvd({ accessToken: TOKEN })).status).toBe(204);
    try {
      const secured = securedSandbox();
      const p = `${base}/signed/file.txt`;

      // The token in the header works for everything.
      await secured.files.write(p, 'via token', { user: 'user' });
      expect(await secured.files.read(p)).toBe('via token');
      expect((await stat(p)).uid).toBe(userIds.uid);

      // No token, no signature.
      await expect(sbx.files.read(p)).rejects.toThrow(AuthenticationError);
      await expect(sbx.files.list(base)).rejects.toThrow();

      // A signed upload URL (multipart, as documented) and a signed download URL.
      const uploadUrl = await secured.uploadUrl(`${base}/signed/up.txt`, {
        user: 'user',
        useSignatureExpiration: 60,
      });
      expect(uploadUrl).toContain('signature=');
      const form = new FormData();
      form.append('file', new Blob(['uploaded via url']), 'ignored-name');
      const up = await fetch(uploadUrl, { method: 'POST', body: form });
      expect(up.status).toBe(200);
      expect(await up.json()).toEqual([{ name: 'up.txt', path: `${base}/signed/up.txt`, type: 'file' }]);
      expect((await stat(`${base}/signed/up.txt`)).uid).toBe(userIds.uid);

      const downloadUrl = await secured.downloadUrl(`${base}/signed/up.txt`);
      const down = await fetch(downloadUrl);
      expect(down.status).toBe(200);
      expect(await down.text()).toBe('uploaded via url');

      // A signature for reading does not allow writing.
      const wrongOp = await fetch(downloadUrl, { method: 'POST', body: form });
      expect(wrongOp.status).toBe(401);

      // Expired, made with another token, or a token header that does not match.
      const expired = Math.floor(Date.now() / 1000) - 10;
      const q = (sig: string, exp?: number) =>
        `${ENVD_URL}/files?path=${encodeURIComponent(p)}&signature=${encodeURIComponent(sig)}` +
        (exp === undefined ? '' : `&signature_expiration=${exp}`);
      const r1 = await fetch(q(fileSignature(p, 'read', '', TOKEN, expired), expired));
      expect(r1.status).toBe(401);
      expect(await r1.json()).toEqual({ code: 401, message: 'signature is already expired' });
      const r2 = await fetch(q(fileSignature(p, 'read', '', 'other-token')));
      expect(r2.status).toBe(401);
      expect(((await r2.json()) as { message: string }).message).toBe('invalid signature');
      const r3 = await fetch(`${ENVD_URL}/files?path=${encodeURIComponent(p)}`, {
        headers: { 'x-access-token': 'wrong' },
      });
      expect(r3.status).toBe(401);
      expect(((await r3.json()) as { message: string }).message).toMatch(/does not match/);
      const r4 = await fetch(`${ENVD_URL}/files?path=${encodeURIComponent(p)}`);
      expect(((await r4.json()) as { message: string }).message).toBe('missing signature query parameter');
      // A signature without expiry stays valid.
      const r5 = await fetch(q(fileSignature(p, 'read', '', TOKEN)));
      expect(await r5.text()).toBe('via token');
    } finally {
      expect((await initEnvd({ accessToken: '' }, TOKEN)).status).toBe(204);
    }
    expect(await sbx.files.exists(base)).toBe(true);
  });

  it('refuses SDK URLs that expired or were tampered with, and keeps the signed user', async () => {
    expect((await initEnvd({ accessToken: TOKEN, defaultUser: 'user' })).status).toBe(204);
    try {
      const secured = securedSandbox();
      const p = `${base}/signed/tamper.txt`;
      await secured.files.write(p, 'secret', { user: 'root' });

      const expired = await secured.downloadUrl(p, { useSignatureExpiration: -5 });
      const r1 = await fetch(expired);
      expect(r1.status).toBe(401);
      expect(await r1.json()).toEqual({ code: 401, message: 'signature is already expired' });

      const valid = new URL(await secured.downloadUrl(p, { useSignatureExpiration: 60 }));
      expect((await fetch(valid)).status).toBe(200);
      const tampered = [
        (u: URL) => u.searchParams.set('path', `${base}/signed/other.txt`),
        (u: URL) => u.searchParams.set('username', 'root'),
        (u: URL) =>
          u.searchParams.set(
            'signature_expiration',
            String(Number(u.searchParams.get('signature_expiration')) + 3600),
          ),
        (u: URL) => u.searchParams.set('signature', u.searchParams.get('signature')!.slice(0, -2) + 'AA'),
      ];
      for (const change of tampered) {
        const u = new URL(valid);
        change(u);
        const r = await fetch(u);
        expect(r.status).toBe(401);
        expect(await r.json()).toEqual({ code: 401, message: 'invalid signature' });
      }

      // A signature for the default user does not become root through a Basic-auth header.
      const upload = await secured.uploadUrl(`${base}/signed/as-default.txt`);
      const form = new FormData();
      form.append('file', new Blob(['x']), 'x');
      const up = await fetch(upload, {
        method: 'POST',
        body: form,
        headers: { authorization: `Basic ${Buffer.from('root:').toString('base64')}` },
      });
      expect(up.status).toBe(200);
      expect((await stat(`${base}/signed/as-default.txt`)).uid).toBe(userIds.uid);
    } finally {
      expect((await initEnvd({ accessToken: '', defaultUser: 'root' }, TOKEN)).status).toBe(204);
    }
  });
});

describe('/files over raw HTTP', () => {
  const url = (query: string) => `${ENVD_URL}/files?${query}`;
  const json = async (r: Response) => (await r.json()) as { code: number; message: string };

  it('answers bad downloads with JSON errors', async () => {
    const missing = await fetch(url(`path=${base}/missing`));
    expect(missing.status).toBe(404);
    expect(await json(missing)).toEqual({ code: 404, message: `path '${base}/missing' does not exist` });
    const dir = await fetch(url(`path=${base}`));
    expect(dir.status).toBe(400);
    expect((await json(dir)).message).toMatch(/is a directory/);
    // No path: the default workdir or the home directory, a directory.
    expect((await fetch(url(''))).status).toBe(400);
    const badUser = await fetch(url(`path=${base}&username=nobody-such`));
    expect(badUser.status).toBe(401);
    const put = await fetch(url(`path=${base}/x`), { method: 'PUT', body: 'x' });
    expect(put.status).toBe(405);
  });

  it('serves byte ranges and HEAD', async () => {
    const p = `${base}/http/range.txt`;
    await sbx.files.write(p, '0123456789');
    const r = await fetch(url(`path=${p}`), { headers: { range: 'bytes=2-5' } });
    expect(r.status).toBe(206);
    expect(r.headers.get('content-range')).toBe('bytes 2-5/10');
    expect(await r.text()).toBe('2345');
    const h = await fetch(url(`path=${p}`), { method: 'HEAD' });
    expect(h.status).toBe(200);
    expect(h.headers.get('content-type')).toBe('application/octet-stream');
    expect(await h.text()).toBe('');
    const bad = await fetch(url(`path=${p}`), { headers: { range: 'bytes=20-' } });
    expect(bad.status).toBe(416);
  });

  it('serves files that report size 0 but have content, like /proc', async () => {
    const version = await readFile('/proc/version', 'utf8');
    expect(await sbx.files.read('/proc/version')).toBe(version);
  });

  it('refuses malformed uploads with 400 and keeps serving', async () => {
    const p = encodeURIComponent(`${base}/http/upload.txt`);
    const post = (headers: Record<string, string>, body: BodyInit, q = `path=${p}`) =>
      fetch(url(q), { method: 'POST', headers, body });

    const cases: [string, Response][] = [
      ['no boundary', await post({ 'content-type': 'multipart/form-data' }, 'junk')],
      [
        'truncated form',
        await post({ 'content-type': 'multipart/form-data; boundary=xyz' }, '--xyz\r\nContent-Disp'),
      ],
      [
        'garbage form',
        await post({ 'content-type': 'multipart/form-data; boundary=xyz' }, 'no parts at all'),
      ],
      ['text/plain', await post({ 'content-type': 'text/plain' }, 'x')],
      ['no content type', await post({}, new Blob([new Uint8Array([1, 2, 3])]))],
      ['raw without path', await post({ 'content-type': 'application/octet-stream' }, 'x', '')],
      [
        'bad gzip',
        await post({ 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' }, 'not gzip'),
      ],
      ['brotli', await post({ 'content-type': 'application/octet-stream', 'content-encoding': 'br' }, 'x')],
      ['onto a directory', await post({ 'content-type': 'application/octet-stream' }, 'x', `path=${base}`)],
    ];
    for (const [name, r] of cases) {
      // An empty form is not an error (E2B answers []); everything else is the client's fault.
      if (name === 'garbage form' && r.status === 200) {
        expect(await r.json()).toEqual([]);
        continue;
      }
      expect([name, r.status]).toEqual([name, 400]);
      expect((await json(r)).code).toBe(400);
    }

    const form = new FormData();
    form.append('file', new Blob(['a']), `${base}/http/dup.txt`);
    form.append('file', new Blob(['b']), `${base}/http/dup.txt`);
    const dup = await fetch(url(''), { method: 'POST', body: form });
    expect(dup.status).toBe(400);
    expect((await json(dup)).message).toMatch(/same path/);

    const noName = new FormData();
    noName.append('other-field', 'value');
    noName.append('file', new Blob(['named by query']));
    const named = await fetch(url(`path=${p}`), { method: 'POST', body: noName });
    expect(named.status).toBe(200);
    expect(await readFile(`${base}/http/upload.txt`, 'utf8')).toBe('named by query');

    const gz = await post(
      { 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' },
      gzipSync('zipped'),
    );
    expect(gz.status).toBe(200);
    expect(await readFile(`${base}/http/upload.txt`, 'utf8')).toBe('zipped');

    expect((await fetch(`${ENVD_URL}/health`)).status).toBe(204);
  });

  it('answers 507 when the disk is full', async () => {
    const mnt = `${base}/small`;
    await mkdir(mnt);
    // Mounted in envd's mount namespace (the fixture gives it its own), where its writes land.
    const inEnvd = ['--target', String(envd.child.pid), '--mount', '--'];
    try {
      execFileSync('nsenter', [...inEnvd, 'mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mnt], {
        stdio: 'ignore',
      });
    } catch {
      return; // no permission to mount here: nothing to test
    }
    try {
      await expect(
        sbx.files.write(`${mnt}/big.bin`, new Uint8Array(randomBytes(512 * 1024))),
      ).rejects.toThrow(NotEnoughSpaceError);
      expect((await fetch(`${ENVD_URL}/health`)).status).toBe(204);
    } finally {
      execFileSync('nsenter', [...inEnvd, 'umount', mnt]);
    }
  });
});
