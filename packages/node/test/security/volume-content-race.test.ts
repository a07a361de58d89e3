import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { Worker } from 'node:worker_threads';
import { DomainError } from '@agentenv/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VolumeFiles } from '../../src/volumes/content.js';
import { VolumeStore } from '../../src/volumes/store.js';

/**
 * The content API against a volume that sandbox code changes under it. A worker thread stands
 * in for the sandbox: it acts on the volume's host directory (a loop-mounted image, as in
 * production), swapping the directory `d` for a symlink to a host directory outside the volume
 * in a tight loop, while the content API chmods, writes (a rename), reads, lists and removes
 * paths through `d`. Whatever the interleaving, nothing outside is touched or revealed.
 */

/** Runs in the worker: `d` a directory, then a symlink to `outside`, then a directory again. */
const SWAPPER = `
const { workerData } = require('node:worker_threads');
const fs = require('node:fs');
const { root, outside, stop } = workerData;
const flag = new Int32Array(stop);
const at = (n) => root + '/' + n;
const attempt = (fn) => { try { fn(); } catch {} };
let trash = 0;
while (Atomics.load(flag, 0) === 0) {
  attempt(() => fs.renameSync(at('d'), at('real')));
  attempt(() => fs.symlinkSync(outside, at('d')));
  attempt(() => fs.lstatSync(at('d')).isSymbolicLink() && fs.unlinkSync(at('d')));
  // A directory the API made at d meanwhile is kept; the swapped-out one goes aside.
  attempt(() => fs.renameSync(at('real'), at('d')));
  attempt(() => fs.renameSync(at('real'), at('trash-' + trash++)));
  Atomics.add(flag, 1, 1);
}
`;

const OPS = 1000;
const PARALLEL = 4;
const CANARY = 'CANARY-OUTSIDE-THE-VOLUME';
const QUOTA = 64 * 1024 * 1024;

let scratch: string;
let outside: string;
let store: VolumeStore;
let files: VolumeFiles;
let root: string;

/** Everything under `dir` that an escaped operation could change, as comparable text. */
function snapshotOf(dir: string): string {
  const lines: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = path.join(d, name);
      const st = statSync(p);
      const body = st.isFile() ? readFileSync(p, 'utf8') : '';
      lines.push(
        `${path.relative(outside, p)} ${st.mode.toString(8)} ${st.uid}:${st.gid} ${st.mtimeMs} ${body}`,
      );
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return lines.join('\n');
}

const outcome = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (e: unknown) => {
      if (e instanceof DomainError && ['not_found', 'invalid', 'conflict'].includes(e.kind)) return e.kind;
      throw e;
    },
  );

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'aenv-volume-race-'));
  outside = path.join(scratch, 'outside');
  mkdirSync(path.join(outside, 'sub'), { recursive: true });
  writeFileSync(path.join(outside, 'f'), CANARY, { mode: 0o600 });
  writeFileSync(path.join(outside, 'sub', 'f'), CANARY, { mode: 0o600 });
  writeFileSync(path.join(outside, 'outside-only'), CANARY, { mode: 0o600 });
  chmodSync(outside, 0o700);
  store = new VolumeStore(path.join(scratch, 'volumes'));
  const v = await store.create('race', QUOTA);
  root = await store.attach(v);
  files = new VolumeFiles(root, v.name, QUOTA);
});
afterAll(async () => {
  for (const v of store.list()) await store.destroy(v.volumeID);
  rmSync(scratch, { recursive: true, force: true });
});

describe.skipIf(process.getuid?.() !== 0)('the volume content API with sandbox code racing it', () => {
  it('never acts on or reveals a host path, over a thousand operations through a swapped directory', async () => {
    mkdirSync(path.join(root, 'd', 'sub'), { recursive: true });
    writeFileSync(path.join(root, 'd', 'f'), 'inside');
    const before = snapshotOf(outside);
    const stop = new SharedArrayBuffer(8);
    const swapper = new Worker(SWAPPER, { eval: true, workerData: { root, outside, stop } });
    const seen = new Map<string, number>();
    const count = (op: string, result: string) =>
      seen.set(`${op}:${result}`, (seen.get(`${op}:${result}`) ?? 0) + 1);
    const ops: [string, () => Promise<unknown>][] = [
      ['chmod', () => files.updateMetadata('/d/f', { mode: 0o777, uid: 0, gid: 0 })],
      ['write', () => files.write('/d/f', Readable.from([Buffer.from('written')]), {})],
      ['write-new', () => files.write('/d/sub/new', Readable.from([Buffer.from('new')]), {})],
      ['mkdir', () => files.makeDir('/d/sub/dir', { force: true, mode: 0o777 })],
      ['remove', () => files.remove('/d/sub')],
      [
        'read',
        async () => {
          const body = await text((await files.read('/d/f')).stream);
          expect(body).not.toBe(CANARY);
        },
      ],
      [
        'list',
        async () => {
          const names = (await files.list('/d', 2)).map((e) => e.name);
          expect(names).not.toContain('outside-only');
        },
      ],
    ];
    try {
      let next = 0;
      await Promise.all(
        Array.from({ length: PARALLEL }, async () => {
          for (let i = next++; i < OPS; i = next++) {
            const [name, op] = ops[i % ops.length]!;
            count(name, await outcome(op()));
          }
        }),
      );
    } finally {
      Atomics.store(new Int32Array(stop), 0, 1);
      await swapper.terminate();
    }
    const swaps = Atomics.load(new Int32Array(stop), 1);
    console.info(`[volume race] ${swaps} swaps; outcomes: ${JSON.stringify(Object.fromEntries(seen))}`);
    expect(snapshotOf(outside)).toBe(before);
    // The race was really run: operations went through d both as a directory and as the symlink.
    expect(seen.get('chmod:ok') ?? 0, 'chmods that reached the directory').toBeGreaterThan(0);
    expect(seen.get('chmod:invalid') ?? 0, 'chmods that met the symlink').toBeGreaterThan(0);
  }, 600_000);

  it('refuses static symlink escapes and never hangs on special files', async () => {
    const before = snapshotOf(outside);
    mkdirSync(path.join(root, 's'), { recursive: true });
    symlinkSync(outside, path.join(root, 's', 'abs'));
    // Relative, climbing out of the image's root to the host directory that holds it.
    symlinkSync('../../../../../../../..' + outside, path.join(root, 's', 'rel'));
    symlinkSync(path.join(outside, 'f'), path.join(root, 's', 'file'));
    execFileSync('mkfifo', [path.join(root, 's', 'fifo')]);
    const kind = (p: Promise<unknown>) => outcome(p);
    for (const dir of ['/s/abs', '/s/rel']) {
      expect(await kind(files.read(`${dir}/f`)), dir).toBe('invalid');
      expect(await kind(files.stat(`${dir}/f`)), dir).toBe('invalid');
      expect(await kind(files.list(dir, 1)), dir).toBe('invalid');
      expect(await kind(files.updateMetadata(`${dir}/f`, { mode: 0o777 })), dir).toBe('invalid');
      expect(await kind(files.write(`${dir}/f`, Readable.from([Buffer.from('x')]), {})), dir).toBe('invalid');
      expect(await kind(files.write(`${dir}/new`, Readable.from([Buffer.from('x')]), {})), dir).toBe(
        'invalid',
      );
      expect(await kind(files.makeDir(`${dir}/new`, { force: true })), dir).toBe('invalid');
      expect(await kind(files.remove(`${dir}/f`)), dir).toBe('invalid');
      expect(await kind(files.remove(`${dir}/sub`)), dir).toBe('invalid');
    }
    expect(await kind(files.read('/s/file'))).toBe('invalid');
    expect(await kind(files.updateMetadata('/s/file', { mode: 0o777 }))).toBe('invalid');
    expect(await kind(files.read('/s/fifo'))).toBe('invalid');
    // A symlink itself is an entry of the volume: stat shows it, remove and overwrite replace it.
    expect((await files.stat('/s/file')).type).toBe('symlink');
    await files.remove('/s/abs');
    await files.write('/s/file', Readable.from([Buffer.from('replaced')]), {});
    expect(await text((await files.read('/s/file')).stream)).toBe('replaced');
    // Recursive removal does not descend through a symlink in the tree.
    await files.remove('/s');
    expect(snapshotOf(outside)).toBe(before);
  });
});
