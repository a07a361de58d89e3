import { spawn } from 'node:child_process';
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, lchown, link, lutimes, mkdir, open, rm, symlink, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { withoutSecrets } from '@agentenv/common';
import { OciError } from './errors.js';
import type { TarBudget } from './limits.js';
import { readTar } from './tar.js';
import { LayerPlanner, type Step } from './unpack-plan.js';
import { applySpecials } from './unpack-specials.js';

export { OPAQUE_MARKER, OVERLAY_OPAQUE_XATTR, WHITEOUT_PREFIX, safeComponents } from './unpack-plan.js';

export interface UnpackResult {
  /** sha256 of the uncompressed archive: the layer's diff id. */
  readonly diffId: string;
  /** Disk use of the unpacked files (file sizes rounded up to 4 KiB blocks, plus directories). */
  readonly bytes: number;
  readonly entries: number;
  /** Size of the uncompressed archive. */
  readonly archiveBytes: number;
  readonly whiteouts: number;
  readonly opaqueDirs: number;
  /** The layer hides everything below it (an opaque marker at its root). */
  readonly rootOpaque: boolean;
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
  const child = spawn('zstd', ['-dcq', '--', file], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: withoutSecrets(),
  });
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

interface LayerStream {
  /** The uncompressed archive. */
  readonly tar: Readable;
  /** sha256 of what `tar` delivered. */
  readonly hash: Hash;
  destroy(): void;
}

/** The blob's uncompressed bytes, hashed on the way; `onBytes` counts the compressed bytes read. */
async function openLayer(blob: string, onBytes?: (compressedDone: number) => void): Promise<LayerStream> {
  const { stream: dec, spawnZstd } = await decompressor(blob);
  const file = createReadStream(blob, { highWaterMark: 1 << 20 });
  let compressed = 0;
  file.on('data', (c) => {
    compressed += c.length;
    onBytes?.(compressed);
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
  return {
    tar: tee,
    hash,
    destroy: () => {
      file.destroy();
      source.destroy();
      tee.destroy();
    },
  };
}

/** Carries out one planned step under `target`; `body` is the entry's data (read for a file). */
async function runStep(
  target: string,
  step: Step,
  body: AsyncIterable<Buffer>,
  asRoot: boolean,
): Promise<void> {
  const path = join(target, step.rel);
  switch (step.op) {
    case 'mkdir':
      await mkdir(path, { mode: 0o700 });
      return;
    case 'attrs':
      if (asRoot && step.owner) await lchown(path, step.owner.uid, step.owner.gid);
      return chmod(path, step.mode);
    case 'remove':
      return step.dir ? rm(path, { recursive: true, force: true }) : unlink(path);
    case 'file': {
      const fh = await open(path, 'wx', 0o600);
      try {
        let pos = 0;
        for await (const chunk of body) {
          await fh.write(chunk, 0, chunk.length, pos);
          pos += chunk.length;
        }
        if (asRoot) await fh.chown(step.owner.uid, step.owner.gid);
        await fh.chmod(step.mode);
        await fh.utimes(step.mtime, step.mtime);
      } finally {
        await fh.close();
      }
      return;
    }
    case 'symlink':
      await symlink(step.target, path);
      if (asRoot) await lchown(path, step.owner.uid, step.owner.gid);
      return lutimes(path, step.mtime, step.mtime);
    case 'link':
      return link(join(target, step.target), path);
  }
}

/** An unpack failure with the layer named; zlib's errors mean a corrupt blob. */
function layerFailure(e: unknown, what: string): unknown {
  if (e instanceof OciError) return new OciError(e.code, `${what}: ${e.message}`, { cause: e });
  if (String((e as NodeJS.ErrnoException).code).startsWith('Z_')) {
    return new OciError('unsafe_layer', `${what} is corrupt: ${(e as Error).message}`, { cause: e });
  }
  return e;
}

/**
 * Unpacks one layer blob (tar, tar+gzip or tar+zstd) into `target`, an empty directory, in
 * overlayfs form: a whiteout `.wh.name` becomes a 0/0 character device `name`, an opaque marker
 * `.wh..wh..opq` sets `trusted.overlay.opaque=y` on its directory. Stacking such layers with
 * overlayfs (mountLayers) composes the image exactly as Docker's overlay2 driver does.
 *
 * Safety (decided by LayerPlanner, unpack-plan.ts): no entry may be absolute or contain `..`; no
 * entry may be created beneath a symlink of the layer (the only way a later write could leave
 * `target`); hard links must point to a non-directory already extracted in the same layer;
 * existing paths are unlinked, never written through. The uncompressed stream's sha256 is
 * checked against `expectedDiffId`. `budget` bounds what the blob inflates to (limits.ts).
 */
export async function unpackLayer(
  blob: string,
  target: string,
  opts: {
    expectedDiffId?: string;
    what: string;
    onBytes?: (compressedDone: number) => void;
    /** Charged with the uncompressed bytes and the entries; stops the unpack when it throws. */
    budget?: TarBudget;
  },
): Promise<UnpackResult> {
  const asRoot = process.getuid?.() === 0;
  const layer = await openLayer(blob, opts.onBytes);
  const planner = new LayerPlanner();
  let entries = 0;
  let archiveBytes = 0;
  const budget: TarBudget = {
    bytes: (n) => {
      archiveBytes += n;
      opts.budget?.bytes(n);
    },
    entry: () => opts.budget?.entry(),
  };
  try {
    for await (const { header, body } of readTar(layer.tar as AsyncIterable<Buffer>, budget)) {
      entries++;
      for (const step of planner.entry(header)) await runStep(target, step, body, asRoot);
    }
  } catch (e) {
    layer.destroy();
    throw layerFailure(e, opts.what);
  }
  const diffId = `sha256:${layer.hash.digest('hex')}`;
  if (opts.expectedDiffId && diffId !== opts.expectedDiffId) {
    throw new OciError(
      'digest_mismatch',
      `${opts.what}: uncompressed content hashes to ${diffId}, but the image config says ${opts.expectedDiffId}; rejected`,
    );
  }
  const { specials, dirTimes, totals } = planner.finish();
  await applySpecials(target, specials);
  for (const [rel, t] of dirTimes) await lutimes(join(target, rel), t, t);
  return { diffId, entries, archiveBytes, ...totals };
}
