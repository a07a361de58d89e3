import { createReadStream, createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';

/** One archive member. Directory names get their trailing `/` here. */
export interface TarEntry {
  name: string;
  kind: 'file' | 'dir';
  mode: number;
  size: number;
  /** Seconds since the epoch. */
  mtime: number;
  /** Local file to read the content from (files only). */
  source?: string;
}

const BLOCK = 512;
const MAX_OCTAL_SIZE = 0o77777777777;

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

/** A PAX extended-header record: `<len> <key>=<value>\n`, the length counting itself. */
export function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const bodyLen = Buffer.byteLength(body);
  const digits = String(bodyLen).length;
  const len = String(bodyLen + digits).length > digits ? bodyLen + digits + 1 : bodyLen + digits;
  return `${len}${body}`;
}

/** Splits a long name into ustar's prefix (≤155 bytes) and name (≤100 bytes), if possible. */
export function splitUstarName(name: string): { prefix: string; name: string } | undefined {
  if (Buffer.byteLength(name) <= 100) return { prefix: '', name };
  for (let i = name.length - 1; i > 0; i--) {
    if (name[i] !== '/') continue;
    const prefix = name.slice(0, i);
    const rest = name.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(rest) <= 100 && rest)
      return { prefix, name: rest };
  }
  return undefined;
}

function header(fields: {
  name: string;
  prefix: string;
  mode: number;
  size: number;
  mtime: number;
  type: string;
}): Buffer {
  const b = Buffer.alloc(BLOCK);
  b.write(fields.name, 0, 100, 'utf8');
  b.write(octal(fields.mode & 0o7777, 8), 100, 'ascii');
  b.write(octal(0, 8), 108, 'ascii');
  b.write(octal(0, 8), 116, 'ascii');
  b.write(octal(Math.min(fields.size, MAX_OCTAL_SIZE), 12), 124, 'ascii');
  b.write(octal(Math.max(0, Math.floor(fields.mtime)), 12), 136, 'ascii');
  b.write('        ', 148, 'ascii');
  b.write(fields.type, 156, 'ascii');
  b.write('ustar\0', 257, 'ascii');
  b.write('00', 263, 'ascii');
  b.write('root', 265, 'ascii');
  b.write('root', 297, 'ascii');
  b.write(fields.prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of b) sum += byte;
  b.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'ascii');
  return b;
}

function padding(size: number): Buffer {
  const rem = size % BLOCK;
  return Buffer.alloc(rem ? BLOCK - rem : 0);
}

/** The header block(s) of one entry: a PAX header first when the name or size does not fit. */
export function tarHeader(e: TarEntry): Buffer {
  const fullName = e.kind === 'dir' && !e.name.endsWith('/') ? `${e.name}/` : e.name;
  const split = splitUstarName(fullName);
  const size = e.kind === 'dir' ? 0 : e.size;
  const blocks: Buffer[] = [];
  let pax = '';
  if (!split) pax += paxRecord('path', fullName);
  if (size > MAX_OCTAL_SIZE) pax += paxRecord('size', String(size));
  if (pax) {
    const data = Buffer.from(pax);
    blocks.push(
      header({ name: 'PaxHeader', prefix: '', mode: 0o644, size: data.length, mtime: e.mtime, type: 'x' }),
      data,
      padding(data.length),
    );
  }
  const names = split ?? { prefix: '', name: fullName.slice(-100) };
  blocks.push(header({ ...names, mode: e.mode, size, mtime: e.mtime, type: e.kind === 'dir' ? '5' : '0' }));
  return Buffer.concat(blocks);
}

async function* tarStream(entries: TarEntry[]): AsyncGenerator<Buffer> {
  for (const e of entries) {
    yield tarHeader(e);
    if (e.kind !== 'file') continue;
    let written = 0;
    for await (const chunk of createReadStream(e.source!)) {
      const buf = chunk as Buffer;
      // A file that grew while archiving is cut at its stat size; the header is already written.
      const take = buf.subarray(0, Math.max(0, e.size - written));
      written += take.length;
      if (take.length) yield take;
    }
    if (written < e.size) throw new Error(`${e.source} shrank while it was archived`);
    yield padding(e.size);
  }
  yield Buffer.alloc(BLOCK * 2);
}

/** Writes a gzip-compressed tar of `entries` to `outPath`. */
export async function writeTarGz(entries: TarEntry[], outPath: string): Promise<void> {
  await pipeline(Readable.from(tarStream(entries)), createGzip(), createWriteStream(outPath));
}
