import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { posix, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { invalid } from '@agentenv/common';
import { archiveBudget, readTar, safeComponents } from '@agentenv/oci';
import type { SizedBody } from '../../util/index.js';

/** One member of a COPY step's archive, placed at its destination in the sandbox. */
export type CopyEntry =
  | { readonly target: string; readonly type: 'dir'; readonly mode: number }
  | {
      readonly target: string;
      readonly type: 'file';
      readonly mode: number;
      /** The file's bytes as the archive is read: to be read to its end (`size` bytes) before the next entry. */
      readonly data: SizedBody;
    };

const HASH = /^[0-9a-f]{64}$/;
/** An uploaded archive, as stored. */
const ARCHIVE_LIMIT = 1 << 30;
/**
 * What one archive may unpack to: its files are streamed into the build sandbox, never held, but
 * a small tar.gz can inflate without end, and each entry costs the step a chmod.
 */
export const COPY_LIMITS = { bytes: 16 * 2 ** 30, entries: 100_000 } as const;

export function checkFilesHash(hash: string): string {
  if (!HASH.test(hash)) throw invalid(`files hash must be 64 lowercase hex digits, not '${hash}'`);
  return hash;
}

/**
 * The archives COPY steps send (E2B's files upload: a tar or tar.gz per content hash), kept under
 * one directory of the node, written to a temporary name and renamed once complete.
 */
export class BuildFiles {
  constructor(
    private readonly dir: string,
    private readonly limits: { readonly bytes: number; readonly entries: number } = COPY_LIMITS,
  ) {}

  private path(hash: string): string {
    return join(this.dir, checkFilesHash(hash));
  }

  async has(hash: string): Promise<boolean> {
    return stat(this.path(hash)).then(
      () => true,
      () => false,
    );
  }

  async put(hash: string, body: Readable): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const tmp = `${this.path(hash)}.tmp-${randomBytes(4).toString('hex')}`;
    let bytes = 0;
    body.on('data', (c: Buffer) => {
      bytes += c.length;
      if (bytes > ARCHIVE_LIMIT) body.destroy(invalid(`files archive over ${ARCHIVE_LIMIT} bytes`));
    });
    try {
      await pipeline(body, createWriteStream(tmp));
      await rename(tmp, this.path(hash));
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** The archive's files and directories, placed as `COPY src dest` (dest absolute) places them. */
  async *entries(hash: string, src: string, dest: string): AsyncGenerator<CopyEntry> {
    const file = this.path(hash);
    if (!(await this.has(hash))) throw invalid(`the files of COPY ${src} (${hash}) were never uploaded`);
    const fh = await open(file);
    const magic = Buffer.alloc(2);
    await fh.read(magic, 0, 2, 0);
    await fh.close();
    const raw = createReadStream(file);
    const source = magic[0] === 0x1f && magic[1] === 0x8b ? raw.pipe(createGunzip()) : raw;
    const max = this.limits;
    const budget = archiveBudget(max, (passed) =>
      invalid(
        `the files of COPY ${src} (${hash}) hold more than ${
          passed === 'bytes' ? `${max.bytes} bytes uncompressed` : `${max.entries} entries`
        }`,
      ),
    );
    for await (const m of readTar(source, budget)) {
      const type = m.header.type === 'dir' ? 'dir' : m.header.type === 'file' ? 'file' : undefined;
      const target = type && copyTarget(src, dest, safeComponents(m.header.path).join('/'), type === 'dir');
      if (!type || !target) {
        for await (const _ of m.body) void _;
        continue;
      }
      const mode = m.header.mode & 0o7777;
      yield type === 'dir'
        ? { target, type, mode }
        : { target, type, mode, data: { length: m.header.size, stream: m.body } };
    }
  }
}

/**
 * Where `COPY src dest` puts an archive member (paths relative to the build context): the source
 * file itself goes to `dest` (into it when dest ends with `/`), a source directory's contents go
 * under `dest`, and matches of a pattern go under `dest` by their path below the pattern's
 * literal directory. Undefined for members outside the source.
 */
export function copyTarget(src: string, dest: string, member: string, isDir = false): string | undefined {
  const source = posix.normalize(src).replace(/^\.\/?|\/$/g, '');
  if (!member || member === '.') return undefined;
  if (member === source)
    return dest.endsWith('/') && !isDir ? posix.join(dest, posix.basename(member)) : dest;
  if (source === '' || member.startsWith(`${source}/`))
    return posix.join(dest, source ? member.slice(source.length + 1) : member);
  if (!/[*?[]/.test(source)) return undefined;
  const literal = source.split('/').filter((_, i, a) => !a.slice(0, i + 1).some((p) => /[*?[]/.test(p)));
  const base = literal.join('/');
  if (base && !member.startsWith(`${base}/`)) return undefined;
  return posix.join(dest, base ? member.slice(base.length + 1) : member);
}
