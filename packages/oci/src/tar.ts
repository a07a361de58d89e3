import { OciError } from './errors.js';
import type { TarBudget } from './limits.js';
import {
  BLOCK,
  blockKind,
  blocks,
  checksumOk,
  cstring,
  memberHeader,
  parsePax,
  type MemberExtensions,
  type TarHeader,
} from './tar-header.js';

export interface TarMember {
  readonly header: TarHeader;
  /** The member's data; must be read to the end (or left alone: it is then skipped). */
  readonly body: AsyncIterable<Buffer>;
}

/** PAX records and GNU long names are held in memory: bound them. */
const META_LIMIT = 1 << 20;

/** Pulls exact byte counts out of a chunked stream without copying more than needed. */
class ByteReader {
  private buf: Buffer = Buffer.alloc(0);
  private done = false;
  constructor(
    private readonly it: AsyncIterator<Buffer>,
    private readonly budget: TarBudget | undefined,
  ) {}

  /** The source's next chunk, charged to the budget (everything read is: padding, trailers). */
  private async next(): Promise<IteratorResult<Buffer>> {
    const r = await this.it.next();
    if (!r.done) this.budget?.bytes(r.value.length);
    return r;
  }

  private async fill(n: number): Promise<boolean> {
    while (this.buf.length < n && !this.done) {
      const r = await this.next();
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
        const r = await this.next();
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
      const r = await this.next();
      if (r.done) this.done = true;
    }
  }
}

async function readMeta(r: ByteReader, size: number): Promise<Buffer> {
  if (size > META_LIMIT) throw new OciError('unsafe_layer', `layer archive: ${size}-byte extended header`);
  if (!size) return Buffer.alloc(0);
  // The header promised this many bytes: an archive that ends here is cut short.
  const data = await r.read(blocks(size));
  if (!data) throw new OciError('unsafe_layer', 'layer archive is truncated');
  return Buffer.from(data.subarray(0, size));
}

/**
 * The extended headers read so far: PAX `x` records and GNU long names apply to the next entry
 * only, PAX `g` records to every later one.
 */
class Extensions {
  private global = new Map<string, Buffer>();
  private pax: Map<string, Buffer> | null = null;
  private longName: string | null = null;
  private longLink: string | null = null;

  /**
   * Consumes a member that is not an entry of its own (an extended header or a volume label) and
   * refuses the GNU kinds that cannot be unpacked correctly; false for an ordinary entry.
   */
  async consume(r: ByteReader, flag: string, size: number): Promise<boolean> {
    switch (flag) {
      case 'x':
        this.pax = new Map([...(this.pax ?? []), ...parsePax(await readMeta(r, size))]);
        return true;
      case 'g':
        this.global = new Map([...this.global, ...parsePax(await readMeta(r, size))]);
        return true;
      case 'L':
        this.longName = cstring(await readMeta(r, size));
        return true;
      case 'K':
        this.longLink = cstring(await readMeta(r, size));
        return true;
      case 'V': // volume label
        await r.skip(blocks(size));
        return true;
      case 'S':
        throw new OciError('unsupported', 'layer archive contains a GNU sparse file, which is not supported');
      case 'M':
        throw new OciError('unsupported', 'layer archive is a multi-volume archive');
    }
    return false;
  }

  /** What applies to the entry that follows, which uses up the per-entry extensions. */
  take(): MemberExtensions {
    const ext = {
      pax: new Map([...this.global, ...(this.pax ?? [])]),
      longName: this.longName,
      longLink: this.longLink,
    };
    this.pax = null;
    this.longName = null;
    this.longLink = null;
    return ext;
  }
}

/** Yields one entry, then skips whatever of its data the consumer left unread, and the padding. */
async function* entry(r: ByteReader, header: TarHeader, dataSize: number): AsyncGenerator<TarMember> {
  if (header.type !== 'file') {
    yield { header, body: (async function* () {})() };
    await r.skip(blocks(dataSize));
    return;
  }
  let consumed = 0;
  const body = (async function* () {
    for await (const chunk of r.take(dataSize)) {
      consumed += chunk.length;
      yield chunk;
    }
  })();
  yield { header, body };
  if (consumed < dataSize) await r.skip(dataSize - consumed);
  await r.skip(blocks(dataSize) - dataSize);
}

/**
 * Reads a tar stream (POSIX ustar/PAX and GNU formats) member by member. Unsupported members
 * (GNU sparse files, multi-volume) are errors rather than silently wrong files. After the end
 * marker the rest of the stream is consumed, so a hash of the input covers every byte. Every
 * byte read and every entry are charged to `budget`, which stops the read when it throws.
 */
export async function* readTar(source: AsyncIterable<Buffer>, budget?: TarBudget): AsyncGenerator<TarMember> {
  const r = new ByteReader(source[Symbol.asyncIterator](), budget);
  const ext = new Extensions();
  for (;;) {
    const h = await r.read(BLOCK);
    if (!h) break;
    if (h.every((c) => c === 0)) {
      await r.drain();
      return;
    }
    if (!checksumOk(h))
      throw new OciError('unsafe_layer', 'layer archive: header checksum mismatch (corrupt tar)');
    const kind = blockKind(h);
    if (await ext.consume(r, kind.flag, kind.size)) continue;
    const { header, dataSize } = memberHeader(h, kind, ext.take());
    budget?.entry();
    yield* entry(r, header, dataSize);
  }
}
