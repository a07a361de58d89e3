import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, lutimes, mkdir, open, rm, symlink, unlink, chmod, lchown } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { OciError } from './errors.js';
import { readTar, type TarHeader } from './tar.js';

/** AUFS/OCI whiteout markers inside layer archives. */
export const WHITEOUT_PREFIX = '.wh.';
export const OPAQUE_MARKER = '.wh..wh..opq';
/** The xattr overlayfs reads to hide a lower directory's contents. */
export const OVERLAY_OPAQUE_XATTR = 'trusted.overlay.opaque';

export interface UnpackResult {
  /** sha256 of the uncompressed archive: the layer's diff id. */
  readonly diffId: string;
  /** Disk use of the unpacked files (file sizes rounded up to 4 KiB blocks, plus directories). */
  readonly bytes: number;
  readonly entries: number;
  readonly whiteouts: number;
  readonly opaqueDirs: number;
  /** The layer hides everything below it (an opaque marker at its root). */
  readonly rootOpaque: boolean;
}

/**
 * Splits an archive path into components, refusing anything that could land outside the layer:
 * absolute paths, `..` components, NUL bytes. `./a//b/` → ['a', 'b']; the root itself → [].
 */
export function safeComponents(path: string): string[] {
  if (path.includes('\0')) throw new OciError('unsafe_layer', `layer entry "${path}" contains a NUL byte`);
  if (path.startsWith('/')) throw new OciError('unsafe_layer', `layer entry "${path}" is an absolute path`);
  const parts = path.split('/').filter((c) => c !== '' && c !== '.');
  if (parts.includes('..'))
    throw new OciError('unsafe_layer', `layer entry "${path}" escapes the layer (..)`);
  return parts;
}

/** xattrs an image may carry into a layer; trusted.* (overlayfs control) and others are dropped. */
function keptXattr(name: string): boolean {
  return name === 'security.capability' || name.startsWith('user.');
}

type Special =
  | {
      op: 'mknod';
      path: string;
      kind: 'c' | 'b' | 'p';
      major: number;
      minor: number;
      mode: number;
      uid: number;
      gid: number;
      mtime: number;
    }
  | { op: 'xattr'; path: string; name: string; value: string };

/**
 * Device nodes, FIFOs and xattrs have no Node API: they are applied by one short python3 process
 * per layer (python3 is a setup.sh prerequisite). Paths are inside the layer being built, whose
 * parents were checked not to be symlinks; nothing follows a symlink.
 */
const SPECIAL_SCRIPT = `
import base64, json, os, stat, sys
root = os.geteuid() == 0
for line in sys.stdin:
    op = json.loads(line)
    p = op["path"]
    if op["op"] == "mknod":
        kind = {"c": stat.S_IFCHR, "b": stat.S_IFBLK, "p": stat.S_IFIFO}[op["kind"]]
        os.mknod(p, kind | 0o600, os.makedev(op["major"], op["minor"]))
        if root:
            os.chown(p, op["uid"], op["gid"], follow_symlinks=False)
        os.chmod(p, op["mode"])
        os.utime(p, (op["mtime"], op["mtime"]), follow_symlinks=False)
    else:
        os.setxattr(p, op["name"], base64.b64decode(op["value"]), follow_symlinks=False)
`;

async function applySpecials(ops: Special[]): Promise<void> {
  if (ops.length === 0) return;
  await new Promise<void>((resolve, reject) => {
    const child = spawn('python3', ['-I', '-S', '-c', SPECIAL_SCRIPT], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
    child.on('error', (e) =>
      reject(
        new OciError('unsupported', `python3 is needed to create whiteouts and device nodes: ${e.message}`),
      ),
    );
    child.on('close', (code) => {
      if (code === 0) resolve();
      else {
        const last = err.trim().split('\n').pop() ?? '';
        const e = new Error(
          `creating whiteouts/device nodes/xattrs failed: ${last}`,
        ) as NodeJS.ErrnoException;
        if (/No space left/.test(err)) e.code = 'ENOSPC';
        reject(e);
      }
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(ops.map((o) => JSON.stringify(o)).join('\n') + '\n');
  });
}

/** The decompressor for a blob, chosen by its magic bytes (gzip, zstd, or a plain tar). */
async function decompressor(file: string): Promise<{ stream: Transform | null; spawnZstd: boolean }> {
  const fh = await open(file, 'r');
  try {
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(4), 0, 4, 0);
    const b = buffer.subarray(0, bytesRead);
    if (b[0] === 0x1f && b[1] === 0x8b)
      return { stream: zlib.createGunzip({ chunkSize: 256 << 10 }), spawnZstd: false };
    if (b[0] === 0x28 && b[1] === 0xb5 && b[2] === 0x2f && b[3] === 0xfd) {
      const z = (zlib as unknown as { createZstdDecompress?: () => Transform }).createZstdDecompress;
      return z ? { stream: z(), spawnZstd: false } : { stream: null, spawnZstd: true };
    }
    return { stream: null, spawnZstd: false };
  } finally {
    await fh.close();
  }
}

function zstdProcess(file: string): Readable {
  const child = spawn('zstd', ['-dcq', '--', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.on('error', (e) =>
    child.stdout.destroy(new OciError('unsupported', `zstd layers need the zstd program: ${e.message}`)),
  );
  child.on('close', (code) => {
    if (code !== 0) child.stdout.destroy(new OciError('unsafe_layer', `zstd failed: ${err.trim()}`));
  });
  return child.stdout;
}

/**
 * Unpacks one layer blob (tar, tar+gzip or tar+zstd) into `target`, an empty directory, in
 * overlayfs form: a whiteout `.wh.name` becomes a 0/0 character device `name`, an opaque marker
 * `.wh..wh..opq` sets `trusted.overlay.opaque=y` on its directory. Stacking such layers with
 * overlayfs (mountLayers) composes the image exactly as Docker's overlay2 driver does.
 *
 * Safety: no entry may be absolute or contain `..`; no entry may be created beneath a symlink
 * of the layer (the only way a later write could leave `target`); hard links must point to a
 * non-directory already extracted in the same layer; existing paths are unlinked, never
 * written through. The uncompressed stream's sha256 is checked against `expectedDiffId`.
 */
export async function unpackLayer(
  blob: string,
  target: string,
  opts: { expectedDiffId?: string; what: string; onBytes?: (compressedDone: number) => void },
): Promise<UnpackResult> {
  const isRoot = process.getuid?.() === 0;
  const { stream: dec, spawnZstd } = await decompressor(blob);
  const file = createReadStream(blob, { highWaterMark: 1 << 20 });
  let compressed = 0;
  file.on('data', (c) => {
    compressed += c.length;
    opts.onBytes?.(compressed);
  });
  const hash = createHash('sha256');
  const tee = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  let source: Readable;
  if (spawnZstd) {
    file.destroy();
    source = zstdProcess(blob);
  } else if (dec) {
    file.on('error', (e) => dec.destroy(e));
    source = file.pipe(dec);
  } else {
    source = file;
  }
  source.on('error', (e) => tee.destroy(e));
  source.pipe(tee);

  /** Every path (relative, '/'-joined) this layer has created so far; 'node' = mknod still queued. */
  const created = new Map<string, 'dir' | 'symlink' | 'file' | 'node'>();
  const specials = new Map<string, Special[]>();
  const dirTimes = new Map<string, number>();
  let bytes = 0;
  let entries = 0;
  let whiteouts = 0;
  let opaqueDirs = 0;
  let rootOpaque = false;

  const full = (rel: string) => join(target, rel);
  const dropUnder = (rel: string) => {
    for (const m of [created, specials, dirTimes] as Map<string, unknown>[]) {
      for (const k of m.keys()) if (k === rel || k.startsWith(`${rel}/`)) m.delete(k);
    }
  };

  /** Creates the parent directories of `parts`, refusing to pass through a symlink or a non-directory. */
  const ensureParent = async (parts: string[], raw: string) => {
    let rel = '';
    for (let i = 0; i < parts.length - 1; i++) {
      rel = rel ? `${rel}/${parts[i]}` : parts[i]!;
      const kind = created.get(rel);
      if (kind === 'dir') continue;
      if (kind === 'symlink') {
        throw new OciError('unsafe_layer', `layer entry "${raw}" goes through the symlink ${rel}`);
      }
      if (kind === 'file') {
        throw new OciError('unsafe_layer', `layer entry "${raw}": ${rel} is not a directory`);
      }
      specials.delete(rel); // a queued whiteout or device node gives way to the directory
      await mkdir(full(rel));
      await chmod(full(rel), 0o755); // whatever the umask, as Docker creates missing parents
      created.set(rel, 'dir');
    }
  };

  /** Makes room for a new entry at rel: an existing directory stays only if the new entry is one too. */
  const clear = async (rel: string, dir: boolean): Promise<boolean> => {
    const kind = created.get(rel);
    if (!kind) return false;
    if (kind === 'dir' && dir) return true;
    if (kind === 'dir') await rm(full(rel), { recursive: true, force: true });
    else if (kind !== 'node') await unlink(full(rel));
    dropUnder(rel);
    return false;
  };

  const queue = (rel: string, op: Special) => {
    const list = specials.get(rel) ?? [];
    list.push(op);
    specials.set(rel, list);
  };

  const handle = async (h: TarHeader, body: AsyncIterable<Buffer>) => {
    const parts = safeComponents(h.path);
    if (parts.length === 0) return; // the layer root itself: nothing to create
    const base = parts[parts.length - 1]!;
    await ensureParent(parts, h.path);
    const parentRel = parts.slice(0, -1).join('/');

    if (base.startsWith(WHITEOUT_PREFIX)) {
      if (base === OPAQUE_MARKER) {
        // overlayfs ignores opacity on a layer's root, so that case is reported and the caller
        // drops the layers below instead.
        if (parentRel) {
          queue(parentRel, { op: 'xattr', path: full(parentRel), name: OVERLAY_OPAQUE_XATTR, value: 'eQ==' });
        } else {
          rootOpaque = true;
        }
        opaqueDirs++;
        return;
      }
      if (base.startsWith(`${WHITEOUT_PREFIX}${WHITEOUT_PREFIX}`)) return; // AUFS metadata (.wh..wh.plnk, …)
      const name = base.slice(WHITEOUT_PREFIX.length);
      if (!name || name === '.' || name === '..')
        throw new OciError('unsafe_layer', `bad whiteout "${h.path}"`);
      const rel = parentRel ? `${parentRel}/${name}` : name;
      await clear(rel, false);
      created.set(rel, 'node');
      queue(rel, {
        op: 'mknod',
        path: full(rel),
        kind: 'c',
        major: 0,
        minor: 0,
        mode: 0,
        uid: 0,
        gid: 0,
        mtime: h.mtime,
      });
      whiteouts++;
      return;
    }

    const rel = parts.join('/');
    const path = full(rel);
    const xattrs = [...h.xattrs].filter(([k]) => keptXattr(k));
    switch (h.type) {
      case 'dir': {
        if (!(await clear(rel, true))) {
          await mkdir(path, { mode: 0o700 });
          created.set(rel, 'dir');
          bytes += 4096;
        }
        if (isRoot) await lchown(path, h.uid, h.gid);
        await chmod(path, h.mode);
        dirTimes.set(rel, h.mtime);
        break;
      }
      case 'file': {
        await clear(rel, false);
        const fh = await open(path, 'wx', 0o600);
        created.set(rel, 'file');
        try {
          let pos = 0;
          for await (const chunk of body) {
            await fh.write(chunk, 0, chunk.length, pos);
            pos += chunk.length;
          }
          if (isRoot) await fh.chown(h.uid, h.gid);
          await fh.chmod(h.mode);
          await fh.utimes(h.mtime, h.mtime);
        } finally {
          await fh.close();
        }
        bytes += Math.ceil(h.size / 4096) * 4096;
        break;
      }
      case 'symlink': {
        await clear(rel, false);
        await symlink(h.linkname, path);
        created.set(rel, 'symlink');
        if (isRoot) await lchown(path, h.uid, h.gid);
        await lutimes(path, h.mtime, h.mtime);
        return; // no xattrs on symlinks
      }
      case 'link': {
        const tparts = safeComponents(h.linkname);
        const trel = tparts.join('/');
        for (let i = 1; i < tparts.length; i++) {
          const k = created.get(tparts.slice(0, i).join('/'));
          if (k === 'symlink')
            throw new OciError('unsafe_layer', `hard link "${h.path}" goes through a symlink`);
        }
        const tkind = created.get(trel);
        if (!tkind) {
          throw new OciError(
            'unsafe_layer',
            `hard link "${h.path}" points outside the layer ("${h.linkname}")`,
          );
        }
        if (tkind === 'dir')
          throw new OciError('unsafe_layer', `hard link "${h.path}" points to a directory`);
        if (trel === rel) return;
        await clear(rel, false);
        const pending = specials.get(trel)?.find((o) => o.op === 'mknod');
        if (pending) {
          queue(rel, { ...pending, path });
        } else {
          await link(full(trel), path);
        }
        created.set(rel, tkind);
        return;
      }
      case 'char':
      case 'block':
      case 'fifo': {
        await clear(rel, false);
        created.set(rel, 'node');
        queue(rel, {
          op: 'mknod',
          path,
          kind: h.type === 'char' ? 'c' : h.type === 'block' ? 'b' : 'p',
          major: h.devmajor,
          minor: h.devminor,
          mode: h.mode,
          uid: h.uid,
          gid: h.gid,
          mtime: h.mtime,
        });
        break;
      }
    }
    for (const [name, value] of xattrs)
      queue(rel, { op: 'xattr', path, name, value: value.toString('base64') });
  };

  try {
    for await (const { header, body } of readTar(tee as AsyncIterable<Buffer>)) {
      entries++;
      await handle(header, body);
    }
  } catch (e) {
    file.destroy();
    source.destroy();
    tee.destroy();
    if (e instanceof OciError) throw new OciError(e.code, `${opts.what}: ${e.message}`, { cause: e });
    if (String((e as NodeJS.ErrnoException).code).startsWith('Z_')) {
      throw new OciError('unsafe_layer', `${opts.what} is corrupt: ${(e as Error).message}`, { cause: e });
    }
    throw e;
  }
  const diffId = `sha256:${hash.digest('hex')}`;
  if (opts.expectedDiffId && diffId !== opts.expectedDiffId) {
    throw new OciError(
      'digest_mismatch',
      `${opts.what}: uncompressed content hashes to ${diffId}, but the image config says ${opts.expectedDiffId}; rejected`,
    );
  }
  const ops = [...specials.values()].flat();
  // Device nodes before xattrs (an opaque directory may hold whiteouts).
  ops.sort((a, b) => (a.op === b.op ? 0 : a.op === 'mknod' ? -1 : 1));
  await applySpecials(ops);
  // Directory times last: creating entries inside a directory changes its mtime.
  const dirs = [...dirTimes].sort((a, b) => b[0].split('/').length - a[0].split('/').length);
  for (const [rel, t] of dirs) await lutimes(full(rel), t, t);
  return { diffId, bytes, entries, whiteouts, opaqueDirs, rootOpaque };
}
