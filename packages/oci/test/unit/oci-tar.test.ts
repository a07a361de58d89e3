import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import tar from 'tar-stream';
import { blockKind, memberHeader, parsePax, type TarHeader } from '../../src/tar-header.js';
import { readTar } from '../../src/tar.js';
import { safeComponents } from '../../src/unpack.js';

/** A raw 512-byte header with a correct checksum (GNU magic unless `ustar`). */
function rawHeader(f: {
  name: string;
  flag: string;
  size?: number;
  linkname?: string;
  ustar?: boolean;
  mode?: number;
}): Buffer {
  const h = Buffer.alloc(512);
  h.write(f.name, 0, 100, 'utf8');
  h.write(`${(f.mode ?? 0o644).toString(8).padStart(7, '0')}\0`, 100, 'ascii');
  h.write('0000000\0', 108, 'ascii');
  h.write('0000000\0', 116, 'ascii');
  h.write(`${(f.size ?? 0).toString(8).padStart(11, '0')}\0`, 124, 'ascii');
  h.write('14707521405\0', 136, 'ascii');
  h.write(f.flag, 156, 'latin1');
  if (f.linkname) h.write(f.linkname, 157, 100, 'utf8');
  h.write(f.ustar ? 'ustar\u000000' : 'ustar  \0', 257, 'latin1');
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return h;
}

const pad = (b: Buffer) => Buffer.concat([b, Buffer.alloc((512 - (b.length % 512)) % 512)]);
const END = Buffer.alloc(1024);

function paxRecords(records: [string, Buffer][]): Buffer {
  const parts = records.map(([k, v]) => {
    const body = Buffer.concat([Buffer.from(` ${k}=`), v, Buffer.from('\n')]);
    let len = body.length + 1;
    while (String(len).length + body.length !== len) len = String(len).length + body.length;
    return Buffer.concat([Buffer.from(String(len)), body]);
  });
  return Buffer.concat(parts);
}

async function read(buf: Buffer, chunk = 97): Promise<{ header: TarHeader; data: string }[]> {
  const chunks: Buffer[] = [];
  for (let i = 0; i < buf.length; i += chunk) chunks.push(buf.subarray(i, i + chunk));
  const out: { header: TarHeader; data: string }[] = [];
  for await (const m of readTar(Readable.from(chunks))) {
    const parts: Buffer[] = [];
    for await (const c of m.body) parts.push(c);
    out.push({ header: m.header, data: Buffer.concat(parts).toString() });
  }
  return out;
}

async function packed(
  entries: { header: Partial<tar.Header> & { name: string }; body?: string }[],
): Promise<Buffer> {
  const p = tar.pack();
  const out: Buffer[] = [];
  const done = (async () => {
    for await (const c of p as AsyncIterable<Buffer>) out.push(c);
  })();
  for (const e of entries) p.entry(e.header, e.body ?? '');
  p.finalize();
  await done;
  return Buffer.concat(out);
}

describe('tar reader', () => {
  it('reads ustar members of every type, in small chunks', async () => {
    const long = `${'d'.repeat(90)}/${'f'.repeat(90)}`;
    const buf = await packed([
      { header: { name: 'dir/', type: 'directory', mode: 0o755 } },
      {
        header: { name: 'dir/a.txt', mode: 0o600, uid: 1000, gid: 100, mtime: new Date(1_700_000_000_000) },
        body: 'hello',
      },
      { header: { name: 'ln', type: 'symlink', linkname: 'dir/a.txt' } },
      { header: { name: 'hard', type: 'link', linkname: 'dir/a.txt' } },
      { header: { name: 'null', type: 'character-device', devmajor: 1, devminor: 3 } },
      { header: { name: 'fifo', type: 'fifo' } },
      { header: { name: long }, body: 'prefix+name' },
      { header: { name: 'big', size: 1500 }, body: 'x'.repeat(1500) },
    ]);
    const got = await read(buf);
    expect(got.map((g) => [g.header.path, g.header.type])).toEqual([
      ['dir/', 'dir'],
      ['dir/a.txt', 'file'],
      ['ln', 'symlink'],
      ['hard', 'link'],
      ['null', 'char'],
      ['fifo', 'fifo'],
      [long, 'file'],
      ['big', 'file'],
    ]);
    expect(got[1]).toMatchObject({
      data: 'hello',
      header: { mode: 0o600, uid: 1000, gid: 100, size: 5, mtime: 1_700_000_000 },
    });
    expect(got[2]!.header.linkname).toBe('dir/a.txt');
    expect(got[4]!.header).toMatchObject({ devmajor: 1, devminor: 3 });
    expect(got[6]!.data).toBe('prefix+name');
    expect(got[7]!.data).toBe('x'.repeat(1500));
  });

  it('skips bodies the consumer does not read', async () => {
    const buf = await packed([
      { header: { name: 'a' }, body: 'a'.repeat(3000) },
      { header: { name: 'b' }, body: 'bee' },
    ]);
    const names: string[] = [];
    let b = '';
    for await (const m of readTar(Readable.from([buf]))) {
      names.push(m.header.path);
      if (m.header.path === 'b') for await (const c of m.body) b += c.toString();
    }
    expect(names).toEqual(['a', 'b']);
    expect(b).toBe('bee');
  });

  it('applies GNU long names and long link names', async () => {
    const name = `${'n'.repeat(150)}/file`;
    const link = `${'l'.repeat(150)}/target`;
    const buf = Buffer.concat([
      rawHeader({ name: '././@LongLink', flag: 'L', size: name.length + 1 }),
      pad(Buffer.from(`${name}\0`)),
      rawHeader({ name: '././@LongLink', flag: 'K', size: link.length + 1 }),
      pad(Buffer.from(`${link}\0`)),
      rawHeader({ name: name.slice(0, 99), flag: '2', linkname: link.slice(0, 99) }),
      END,
    ]);
    const [m] = await read(buf);
    expect(m!.header).toMatchObject({ path: name, linkname: link, type: 'symlink' });
  });

  it('keeps PAX xattr values as raw bytes and honours PAX path, size, uid', async () => {
    const cap = Buffer.from([0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0xff, 0xfe]);
    const pax = paxRecords([
      ['path', Buffer.from('ünïcode/päth')],
      ['uid', Buffer.from('3000000')],
      ['SCHILY.xattr.security.capability', cap],
    ]);
    const buf = Buffer.concat([
      rawHeader({ name: 'PaxHeader', flag: 'x', size: pax.length, ustar: true }),
      pad(pax),
      rawHeader({ name: 'short', flag: '0', size: 3, ustar: true }),
      pad(Buffer.from('abc')),
      END,
    ]);
    const [m] = await read(buf);
    expect(m!.header.path).toBe('ünïcode/päth');
    expect(m!.header.uid).toBe(3_000_000);
    expect(m!.header.xattrs.get('security.capability')).toEqual(cap);
    expect(m!.data).toBe('abc');
  });

  it('refuses corrupt, truncated and sparse archives', async () => {
    const good = await packed([{ header: { name: 'a' }, body: 'abc' }]);
    const corrupt = Buffer.from(good);
    corrupt[10] = 0x41;
    await expect(read(corrupt)).rejects.toThrow(/checksum mismatch/);
    await expect(read(good.subarray(0, 600))).rejects.toThrow(/truncated/);
    // Cut right after an extended header that announces its records.
    for (const flag of ['x', 'L'])
      await expect(read(rawHeader({ name: 'meta', flag, size: 100 }))).rejects.toThrow(/truncated/);
    await expect(read(Buffer.concat([rawHeader({ name: 's', flag: 'S', size: 0 }), END]))).rejects.toThrow(
      /sparse/,
    );
    await expect(read(Buffer.concat([rawHeader({ name: 'weird', flag: 'Z' }), END]))).rejects.toThrow(
      /unsupported type 'Z'/,
    );
  });

  it('consumes everything after the end marker (the diff id covers it)', async () => {
    const buf = Buffer.concat([await packed([{ header: { name: 'a' }, body: 'x' }]), Buffer.alloc(10_240)]);
    let pulled = 0;
    const src = (async function* () {
      for (let i = 0; i < buf.length; i += 512) {
        pulled += Math.min(512, buf.length - i);
        yield buf.subarray(i, i + 512);
      }
    })();
    for await (const m of readTar(src)) for await (const _ of m.body) void _;
    expect(pulled).toBe(buf.length);
  });
});

describe('tar extended headers', () => {
  it('applies global PAX records to every later entry, per-entry ones to the next only', async () => {
    const global = paxRecords([['uid', Buffer.from('7')]]);
    const own = paxRecords([['uid', Buffer.from('8')]]);
    const buf = Buffer.concat([
      rawHeader({ name: 'g', flag: 'g', size: global.length }),
      pad(global),
      rawHeader({ name: 'x', flag: 'x', size: own.length }),
      pad(own),
      rawHeader({ name: 'a', flag: '0' }),
      rawHeader({ name: 'b', flag: '0' }),
      END,
    ]);
    expect((await read(buf)).map((m) => [m.header.path, m.header.uid])).toEqual([
      ['a', 8],
      ['b', 7],
    ]);
  });

  it('refuses an extended header too large to hold in memory', async () => {
    const buf = Buffer.concat([rawHeader({ name: 'x', flag: 'x', size: (1 << 20) + 1 }), END]);
    await expect(read(buf)).rejects.toThrow(/1048577-byte extended header/);
  });
});

describe('tar member headers', () => {
  const none = { pax: new Map<string, Buffer>(), longName: null, longLink: null };
  const pax = (records: Record<string, string>) =>
    new Map(Object.entries(records).map(([k, v]) => [k, Buffer.from(v)]));
  const parse = (h: Buffer, ext = none) => memberHeader(h, blockKind(h), ext);

  it('takes the path from PAX, else a GNU long name, else the ustar prefix and name', () => {
    const h = rawHeader({ name: 'name', flag: '0', linkname: 'field', ustar: true });
    h.write('prefix', 345, 'utf8');
    expect(parse(h).header).toMatchObject({ path: 'prefix/name', linkname: 'field' });
    const gnu = { ...none, longName: 'long/name', longLink: 'long/link' };
    expect(parse(h, gnu).header).toMatchObject({ path: 'long/name', linkname: 'long/link' });
    const both = { ...gnu, pax: pax({ path: 'pax/path', linkpath: 'pax/link' }) };
    expect(parse(h, both).header).toMatchObject({ path: 'pax/path', linkname: 'pax/link' });
    // Old GNU headers have no prefix field: those bytes are something else.
    const old = rawHeader({ name: 'name', flag: '0' });
    old.write('prefix', 345, 'utf8');
    expect(parse(old).header.path).toBe('name');
  });

  it('derives the type from the flag and a trailing slash', () => {
    const type = (name: string, flag: string) => parse(rawHeader({ name, flag })).header.type;
    expect(type('d/', '0')).toBe('dir');
    expect(type('d/', '\0')).toBe('dir');
    expect(type('c/', '7')).toBe('file');
    expect(type('dump', 'D')).toBe('dir');
    expect(type('p', '6')).toBe('fifo');
    expect(() => type('weird', 'Z')).toThrow(/member weird has unsupported type 'Z'/);
  });

  it('lets PAX numbers replace the header fields, and refuses bad ones', () => {
    const h = rawHeader({ name: 'f', flag: '0', size: 5 });
    const ext = { ...none, pax: pax({ size: '12', gid: '70000', mtime: '1700000000.25' }) };
    expect(parse(h, ext)).toMatchObject({
      dataSize: 12,
      header: { size: 12, gid: 70000, mtime: 1700000000.25 },
    });
    // Only files have a size; other members' data is skipped all the same.
    expect(parse(rawHeader({ name: 'l', flag: '2', size: 3 }))).toMatchObject({
      dataSize: 3,
      header: { size: 0 },
    });
    expect(() => parse(h, { ...none, pax: pax({ uid: '-1' }) })).toThrow(/bad PAX uid/);
    expect(() => parse(h, { ...none, pax: pax({ mtime: 'soon' }) })).toThrow(/bad PAX mtime/);
    expect(() => parse(h, { ...none, pax: pax({ 'GNU.sparse.map': '0,1' }) })).toThrow(/PAX sparse file/);
  });

  it('reads base-256 numbers, refusing negative ones', () => {
    const h = rawHeader({ name: 'big', flag: '0' });
    h.fill(0, 124, 136);
    h[124] = 0x80;
    h.writeUIntBE(10 * 2 ** 32, 130, 6);
    expect(blockKind(h)).toEqual({ flag: '0', size: 10 * 2 ** 32 });
    h[124] = 0xff;
    expect(() => blockKind(h)).toThrow(/negative size/);
  });

  it('parses PAX records with binary values, refusing malformed ones', () => {
    const value = Buffer.from([0, 0x0a, 0xff]);
    expect(
      parsePax(
        paxRecords([
          ['SCHILY.xattr.user.a', value],
          ['path', Buffer.from('p')],
        ]),
      ),
    ).toEqual(
      new Map([
        ['SCHILY.xattr.user.a', value],
        ['path', Buffer.from('p')],
      ]),
    );
    expect(() => parsePax(Buffer.from('99 path=p\n'))).toThrow(/malformed PAX header/);
    expect(() => parsePax(Buffer.from('x path=p\n'))).toThrow(/malformed PAX header/);
    expect(() => parsePax(Buffer.from('5 ab\n'))).toThrow(/malformed PAX record/);
  });
});

describe('archive paths', () => {
  it('normalises harmless forms', () => {
    expect(safeComponents('./a//b/./c/')).toEqual(['a', 'b', 'c']);
    expect(safeComponents('./')).toEqual([]);
    expect(safeComponents('a..b/..c')).toEqual(['a..b', '..c']);
  });
  it('refuses escapes', () => {
    expect(() => safeComponents('/etc/passwd')).toThrow(/absolute/);
    expect(() => safeComponents('a/../../x')).toThrow(/escapes/);
    expect(() => safeComponents('..')).toThrow(/escapes/);
    expect(() => safeComponents('a\0b')).toThrow(/NUL/);
  });
});
