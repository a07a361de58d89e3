import { OciError } from './errors.js';

/** One archive member, with PAX and GNU long-name extensions already applied. */
export interface TarHeader {
  readonly path: string;
  readonly type: 'file' | 'dir' | 'symlink' | 'link' | 'char' | 'block' | 'fifo';
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  readonly size: number;
  /** Seconds since the epoch (fractional with PAX mtime). */
  readonly mtime: number;
  readonly linkname: string;
  readonly devmajor: number;
  readonly devminor: number;
  /** Extended attributes from PAX `SCHILY.xattr.*` records, values as raw bytes. */
  readonly xattrs: ReadonlyMap<string, Buffer>;
}

export interface TarMember {
  readonly header: TarHeader;
  /** The member's data; must be read to the end (or left alone: it is then skipped). */
  readonly body: AsyncIterable<Buffer>;
}

const BLOCK = 512;
/** PAX records and GNU long names are held in memory: bound them. */
const META_LIMIT = 1 << 20;

/** Pulls exact byte counts out of a chunked stream without copying more than needed. */
class ByteReader {
  private buf: Buffer = Buffer.alloc(0);
  private done = false;
  constructor(private readonly it: AsyncIterator<Buffer>) {}

  private async fill(n: number): Promise<boolean> {
    while (this.buf.length < n && !this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else this.buf = this.buf.length ? Buffer.concat([this.buf, r.value]) : r.value;
    }
    return this.buf.length >= n;
  }

  /** Exactly n bytes, or null at a clean end of stream (nothing buffered). */
  async read(n: number): Promise<Buffer | null> {
    if (!(await this.fill(n))) {
      if (this.buf.length === 0) return null;
      throw new OciError('unsafe_layer', 'layer archive is truncated');
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** Yields exactly n bytes in chunks as they arrive. */
  async *take(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.buf.length === 0) {
        if (this.done) throw new OciError('unsafe_layer', 'layer archive is truncated');
        const r = await this.it.next();
        if (r.done) {
          this.done = true;
          continue;
        }
        this.buf = r.value;
      }
      const k = Math.min(left, this.buf.length);
      const out = this.buf.subarray(0, k);
      this.buf = this.buf.subarray(k);
      left -= k;
      yield out;
    }
  }

  async skip(n: number): Promise<void> {
    for await (const _ of this.take(n)) {
      // discard
    }
  }

  /** Consumes whatever follows (trailing zero blocks, padding) so the caller's hash covers it. */
  async drain(): Promise<void> {
    this.buf = Buffer.alloc(0);
    while (!this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
    }
  }
}

function cstring(b: Buffer): string {
  const z = b.indexOf(0);
  return (z < 0 ? b : b.subarray(0, z)).toString('utf8');
}

/** Octal ASCII, or GNU base-256 when the high bit of the first byte is set. */
function num(b: Buffer, what: string): number {
  if (b.length && b[0]! & 0x80) {
    if (b[0] === 0xff) throw new OciError('unsafe_layer', `layer archive: negative ${what}`);
    let v = b[0]! & 0x7f;
    for (let i = 1; i < b.length; i++) {
      v = v * 256 + b[i]!;
      if (!Number.isSafeInteger(v)) throw new OciError('unsafe_layer', `layer archive: ${what} too large`);
    }
    return v;
  }
  const s = cstring(b).trim();
  if (!s) return 0;
  if (!/^[0-7]+$/.test(s)) throw new OciError('unsafe_layer', `layer archive: bad ${what} field "${s}"`);
  return parseInt(s, 8);
}

function checksumOk(h: Buffer): boolean {
  const stored = num(h.subarray(148, 156), 'checksum');
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const c = i >= 148 && i < 156 ? 32 : h[i]!;
    unsigned += c;
    signed += c > 127 ? c - 256 : c;
  }
  return stored === unsigned || stored === signed;
}

/** PAX records `<len> <key>=<value>\n`; values stay bytes (xattr values are binary). */
function parsePax(b: Buffer): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  let off = 0;
  while (off < b.length) {
    const sp = b.indexOf(0x20, off);
    if (sp < 0) break;
    const len = Number(b.subarray(off, sp).toString('ascii'));
    if (!Number.isInteger(len) || len <= 0 || off + len > b.length) {
      throw new OciError('unsafe_layer', 'layer archive: malformed PAX header');
    }
    const rec = b.subarray(sp + 1, off + len - 1); // without the trailing newline
    const eq = rec.indexOf(0x3d);
    if (eq < 0) throw new OciError('unsafe_layer', 'layer archive: malformed PAX record');
    out.set(rec.subarray(0, eq).toString('utf8'), Buffer.from(rec.subarray(eq + 1)));
    off += len;
  }
  return out;
}

const TYPES: Record<string, TarHeader['type']> = {
  '0': 'file',
  '\0': 'file',
  '7': 'file',
  '1': 'link',
  '2': 'symlink',
  '3': 'char',
  '4': 'block',
  '5': 'dir',
  '6': 'fifo',
};

/**
 * Reads a tar stream (POSIX ustar/PAX and GNU formats) member by member. Unsupported members
 * (GNU sparse files, multi-volume) are errors rather than silently wrong files. After the end
 * marker the rest of the stream is consumed, so a hash of the input covers every byte.
 */
export async function* readTar(source: AsyncIterable<Buffer>): AsyncGenerator<TarMember> {
  const r = new ByteReader(source[Symbol.asyncIterator]());
  let globalPax = new Map<string, Buffer>();
  let pax: Map<string, Buffer> | null = null;
  let longName: string | null = null;
  let longLink: string | null = null;
  for (;;) {
    const h = await r.read(BLOCK);
    if (!h) break;
    if (h.every((c) => c === 0)) {
      await r.drain();
      return;
    }
    if (!checksumOk(h))
      throw new OciError('unsafe_layer', 'layer archive: header checksum mismatch (corrupt tar)');
    const flag = String.fromCharCode(h[156]!);
    const size = num(h.subarray(124, 136), 'size');
    const padded = Math.ceil(size / BLOCK) * BLOCK;
    const meta = async () => {
      if (size > META_LIMIT)
        throw new OciError('unsafe_layer', `layer archive: ${size}-byte extended header`);
      const b = size ? Buffer.from((await r.read(padded))!.subarray(0, size)) : Buffer.alloc(0);
      return b;
    };
    switch (flag) {
      case 'x':
        pax = new Map([...(pax ?? []), ...parsePax(await meta())]);
        continue;
      case 'g':
        globalPax = new Map([...globalPax, ...parsePax(await meta())]);
        continue;
      case 'L':
        longName = cstring(await meta());
        continue;
      case 'K':
        longLink = cstring(await meta());
        continue;
      case 'V': // volume label
        await r.skip(padded);
        continue;
      case 'S':
        throw new OciError('unsupported', 'layer archive contains a GNU sparse file, which is not supported');
      case 'M':
        throw new OciError('unsupported', 'layer archive is a multi-volume archive');
    }
    const ext = new Map([...globalPax, ...(pax ?? [])]);
    pax = null;
    if ([...ext.keys()].some((k) => k.startsWith('GNU.sparse.'))) {
      throw new OciError('unsupported', 'layer archive contains a PAX sparse file, which is not supported');
    }
    const magic = h.subarray(257, 263).toString('latin1');
    const ustar = magic === 'ustar\0';
    let path = cstring(h.subarray(0, 100));
    if (ustar) {
      const prefix = cstring(h.subarray(345, 500));
      if (prefix) path = `${prefix}/${path}`;
    }
    if (longName !== null) path = longName;
    if (ext.has('path')) path = ext.get('path')!.toString('utf8');
    let linkname = longLink ?? cstring(h.subarray(157, 257));
    if (ext.has('linkpath')) linkname = ext.get('linkpath')!.toString('utf8');
    longName = null;
    longLink = null;

    let type = TYPES[flag];
    if (flag === 'D') type = 'dir'; // GNU dump dir: body is a listing
    if (!type) {
      throw new OciError('unsupported', `layer archive member ${path} has unsupported type '${flag}'`);
    }
    if (type === 'file' && flag !== '7' && path.endsWith('/')) type = 'dir';
    const numPax = (key: string, fallback: number): number => {
      const v = ext.get(key);
      if (!v) return fallback;
      const n = Number(v.toString('ascii'));
      if (!Number.isFinite(n) || n < 0) throw new OciError('unsafe_layer', `layer archive: bad PAX ${key}`);
      return n;
    };
    const realSize = numPax('size', size);
    const xattrs = new Map<string, Buffer>();
    for (const [k, v] of ext)
      if (k.startsWith('SCHILY.xattr.')) xattrs.set(k.slice('SCHILY.xattr.'.length), v);
    const header: TarHeader = {
      path,
      type,
      mode: num(h.subarray(100, 108), 'mode') & 0o7777,
      uid: numPax('uid', num(h.subarray(108, 116), 'uid')),
      gid: numPax('gid', num(h.subarray(116, 124), 'gid')),
      size: type === 'file' ? realSize : 0,
      mtime: numPax('mtime', num(h.subarray(136, 148), 'mtime')),
      linkname,
      devmajor: ustar || magic.startsWith('ustar') ? num(h.subarray(329, 337), 'devmajor') : 0,
      devminor: ustar || magic.startsWith('ustar') ? num(h.subarray(337, 345), 'devminor') : 0,
      xattrs,
    };
    const dataLen = Math.ceil(realSize / BLOCK) * BLOCK;
    if (header.type === 'file') {
      let consumed = 0;
      const body = (async function* () {
        for await (const chunk of r.take(realSize)) {
          consumed += chunk.length;
          yield chunk;
        }
      })();
      yield { header, body };
      // Skip what the consumer did not read, then the padding.
      if (consumed < realSize) await r.skip(realSize - consumed);
      await r.skip(dataLen - realSize);
    } else {
      yield { header, body: (async function* () {})() };
      await r.skip(dataLen);
    }
  }
}
