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

/** What the extended headers before a member say about it. */
export interface MemberExtensions {
  /** Global PAX records overridden by the member's own. */
  readonly pax: ReadonlyMap<string, Buffer>;
  /** From GNU `L` and `K` members. */
  readonly longName: string | null;
  readonly longLink: string | null;
}

export const BLOCK = 512;

/** The bytes `size` bytes of data take in the archive, padded to whole blocks. */
export function blocks(size: number): number {
  return Math.ceil(size / BLOCK) * BLOCK;
}

export function cstring(b: Buffer): string {
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

export function checksumOk(h: Buffer): boolean {
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

/** The type flag and the data size a header block declares (before any PAX override). */
export function blockKind(h: Buffer): { flag: string; size: number } {
  return { flag: String.fromCharCode(h[156]!), size: num(h.subarray(124, 136), 'size') };
}

/** PAX records `<len> <key>=<value>\n`; values stay bytes (xattr values are binary). */
export function parsePax(b: Buffer): Map<string, Buffer> {
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

function memberType(flag: string, path: string): TarHeader['type'] {
  let type = TYPES[flag];
  if (flag === 'D') type = 'dir'; // GNU dump dir: body is a listing
  if (!type) {
    throw new OciError('unsupported', `layer archive member ${path} has unsupported type '${flag}'`);
  }
  // Old archivers marked directories only by the trailing slash.
  if (type === 'file' && flag !== '7' && path.endsWith('/')) type = 'dir';
  return type;
}

/** The path the ustar name and prefix fields give, unless a GNU long name or PAX path replaces it. */
function memberPath(h: Buffer, ustar: boolean, ext: MemberExtensions): string {
  const pax = ext.pax.get('path');
  if (pax) return pax.toString('utf8');
  if (ext.longName !== null) return ext.longName;
  const name = cstring(h.subarray(0, 100));
  const prefix = ustar ? cstring(h.subarray(345, 500)) : '';
  return prefix ? `${prefix}/${name}` : name;
}

function memberLink(h: Buffer, ext: MemberExtensions): string {
  const pax = ext.pax.get('linkpath');
  if (pax) return pax.toString('utf8');
  return ext.longLink ?? cstring(h.subarray(157, 257));
}

function paxNumber(pax: ReadonlyMap<string, Buffer>, key: string, fallback: number): number {
  const v = pax.get(key);
  if (!v) return fallback;
  const n = Number(v.toString('ascii'));
  if (!Number.isFinite(n) || n < 0) throw new OciError('unsafe_layer', `layer archive: bad PAX ${key}`);
  return n;
}

function paxXattrs(pax: ReadonlyMap<string, Buffer>): Map<string, Buffer> {
  const xattrs = new Map<string, Buffer>();
  for (const [k, v] of pax) if (k.startsWith('SCHILY.xattr.')) xattrs.set(k.slice('SCHILY.xattr.'.length), v);
  return xattrs;
}

/**
 * The header of an entry member (not an extended header) from its block and the extensions that
 * precede it, with `dataSize`, the bytes of data that follow it in the archive (before padding).
 */
export function memberHeader(
  h: Buffer,
  kind: { flag: string; size: number },
  ext: MemberExtensions,
): { header: TarHeader; dataSize: number } {
  if ([...ext.pax.keys()].some((k) => k.startsWith('GNU.sparse.'))) {
    throw new OciError('unsupported', 'layer archive contains a PAX sparse file, which is not supported');
  }
  const magic = h.subarray(257, 263).toString('latin1');
  const ustar = magic === 'ustar\0';
  const path = memberPath(h, ustar, ext);
  const linkname = memberLink(h, ext);
  const type = memberType(kind.flag, path);
  const dataSize = paxNumber(ext.pax, 'size', kind.size);
  const xattrs = paxXattrs(ext.pax);
  // Both ustar and old GNU ('ustar  ') headers have the device fields.
  const devices = magic.startsWith('ustar');
  const header: TarHeader = {
    path,
    type,
    mode: num(h.subarray(100, 108), 'mode') & 0o7777,
    uid: paxNumber(ext.pax, 'uid', num(h.subarray(108, 116), 'uid')),
    gid: paxNumber(ext.pax, 'gid', num(h.subarray(116, 124), 'gid')),
    size: type === 'file' ? dataSize : 0,
    mtime: paxNumber(ext.pax, 'mtime', num(h.subarray(136, 148), 'mtime')),
    linkname,
    devmajor: devices ? num(h.subarray(329, 337), 'devmajor') : 0,
    devminor: devices ? num(h.subarray(337, 345), 'devminor') : 0,
    xattrs,
  };
  return { header, dataSize };
}
