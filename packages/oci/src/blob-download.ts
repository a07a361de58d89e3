import { createHash, type Hash } from 'node:crypto';
import { open, rm, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { OciError } from './errors.js';
import { NetworkError } from './http.js';

export interface BlobProgress {
  readonly done: number;
  readonly total: number;
}

/** What the answer to a blob GET means for a download that already holds `done` bytes. */
export type ResumeStep = 'append' | 'restart' | 'bad_range' | 'failed';

/** The Range header asking for what follows the `done` bytes already written. */
export function resumeHeaders(done: number): Record<string, string> {
  return done > 0 ? { range: `bytes=${done}-` } : {};
}

export function resumeStep(done: number, status: number, contentRange: string): ResumeStep {
  if (done > 0) {
    // A server that ignores the range sends the whole blob again.
    if (status === 200) return 'restart';
    if (status === 206) return contentRange.startsWith(`bytes ${done}-`) ? 'append' : 'bad_range';
  }
  return status === 200 ? 'append' : 'failed';
}

/**
 * An error while copying a body to disk: integrity and disk errors are final; anything else is the
 * transfer breaking off, a NetworkError so that the download is retried from where it stopped.
 */
export function transferError(e: unknown, what: string, done: number, size: number): unknown {
  if (e instanceof OciError) return e;
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOSPC' || code === 'EDQUOT' || code === 'EIO') return e;
  return new NetworkError(
    `${what}: transfer interrupted at ${done}/${size} bytes: ${(e as Error).message}`,
    code,
    {
      cause: e,
    },
  );
}

/**
 * The file a blob downloads into (created, must not exist). It keeps the offset and the running
 * sha256 across retries, so a retry can resume with a Range request instead of starting over.
 */
export class BlobFile {
  private hash: Hash = createHash('sha256');
  private written = 0;

  private constructor(
    private readonly fh: FileHandle,
    private readonly path: string,
    private readonly size: number,
    private readonly what: string,
  ) {}

  static async create(path: string, size: number, what: string): Promise<BlobFile> {
    return new BlobFile(await open(path, 'wx', 0o600), path, size, what);
  }

  get done(): number {
    return this.written;
  }

  async restart(): Promise<void> {
    this.written = 0;
    this.hash = createHash('sha256');
    await this.fh.truncate(0);
  }

  /** Appends `body`; one that ends short of the size is a NetworkError, so it is resumed. */
  async receive(body: Readable, onProgress?: (p: BlobProgress) => void): Promise<void> {
    let lastReport = 0;
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        if (this.written + chunk.length > this.size) {
          body.destroy();
          throw new OciError(
            'digest_mismatch',
            `${this.what}: registry sent more than the ${this.size} bytes the manifest declares`,
          );
        }
        await this.fh.write(chunk, 0, chunk.length, this.written);
        this.hash.update(chunk);
        this.written += chunk.length;
        const now = Date.now();
        if (onProgress && now - lastReport >= 100) {
          lastReport = now;
          onProgress({ done: this.written, total: this.size });
        }
      }
    } catch (e) {
      throw transferError(e, this.what, this.written, this.size);
    }
    if (this.written < this.size) {
      throw new NetworkError(
        `${this.what}: connection closed at ${this.written}/${this.size} bytes`,
        'ESHORT',
      );
    }
  }

  /** Checks the bytes against `digest`; only called once, after the last byte. */
  async complete(digest: string, sync: boolean): Promise<void> {
    const got = `sha256:${this.hash.digest('hex')}`;
    if (got !== digest) {
      throw new OciError(
        'digest_mismatch',
        `${this.what}: downloaded bytes hash to ${got}, not ${digest}; rejected`,
      );
    }
    if (sync) await this.fh.sync();
  }

  /** Closes the file, deleting it unless it was completed. */
  async close(keep: boolean): Promise<void> {
    await this.fh.close();
    if (!keep) await rm(this.path, { force: true });
  }
}
