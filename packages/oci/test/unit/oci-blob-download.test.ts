import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobFile, resumeHeaders, resumeStep, transferError } from '../../src/blob-download.js';
import { OciError } from '../../src/errors.js';
import { NetworkError } from '../../src/http.js';

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('resuming a blob download', () => {
  it('asks for the rest once some bytes are in', () => {
    expect(resumeHeaders(0)).toEqual({});
    expect(resumeHeaders(1234)).toEqual({ range: 'bytes=1234-' });
  });

  it('decides from the status and Content-Range what the answer continues', () => {
    expect(resumeStep(0, 200, '')).toBe('append');
    expect(resumeStep(100, 206, 'bytes 100-999/1000')).toBe('append');
    // The server ignored the range and sends everything again.
    expect(resumeStep(100, 200, '')).toBe('restart');
    expect(resumeStep(100, 206, 'bytes 0-999/1000')).toBe('bad_range');
    expect(resumeStep(100, 206, '')).toBe('bad_range');
    expect(resumeStep(0, 206, 'bytes 0-999/1000')).toBe('failed');
    expect(resumeStep(0, 404, '')).toBe('failed');
    expect(resumeStep(100, 416, '')).toBe('failed');
  });

  it('retries a broken transfer, but not a full disk or an integrity error', () => {
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const broken = transferError(reset, 'layer x', 10, 99);
    expect(broken).toBeInstanceOf(NetworkError);
    expect(broken).toMatchObject({
      code: 'ECONNRESET',
      message: 'layer x: transfer interrupted at 10/99 bytes: socket hang up',
    });
    const full = Object.assign(new Error('no space'), { code: 'ENOSPC' });
    expect(transferError(full, 'layer x', 10, 99)).toBe(full);
    const mismatch = new OciError('digest_mismatch', 'too long');
    expect(transferError(mismatch, 'layer x', 10, 99)).toBe(mismatch);
  });
});

describe('the file a blob downloads into', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'aenv-oci-blob-unit-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const data = Buffer.from('0123456789abcdef');

  it('continues after a short transfer and keeps the verified bytes', async () => {
    const path = join(dir, 'resumed');
    const file = await BlobFile.create(path, data.length, 'blob');
    await expect(file.receive(Readable.from([data.subarray(0, 5)]))).rejects.toThrow(
      /blob: connection closed at 5\/16 bytes/,
    );
    expect(file.done).toBe(5);
    const seen: number[] = [];
    await file.receive(Readable.from([data.subarray(5)]), (p) => seen.push(p.done));
    await file.complete(sha(data), false);
    await file.close(true);
    expect(await readFile(path)).toEqual(data);
    expect(seen).toEqual([16]);
  });

  it('starts over when told to, and deletes a file that fails its digest', async () => {
    const path = join(dir, 'restarted');
    const file = await BlobFile.create(path, data.length, 'blob');
    await expect(file.receive(Readable.from([Buffer.from('garbage')]))).rejects.toThrow(NetworkError);
    await file.restart();
    await file.receive(Readable.from([data]));
    await file.complete(sha(data), false);
    await file.close(true);
    expect(await readFile(path)).toEqual(data);

    const bad = await BlobFile.create(join(dir, 'bad'), data.length, 'blob');
    await bad.receive(Readable.from([data]));
    await expect(bad.complete(sha(Buffer.from('other')), false)).rejects.toThrow(
      /blob: downloaded bytes hash to/,
    );
    await bad.close(false);
    await expect(stat(join(dir, 'bad'))).rejects.toThrow(/ENOENT/);
  });

  it('refuses more bytes than declared, and a file that exists already', async () => {
    const file = await BlobFile.create(join(dir, 'long'), 4, 'blob');
    await expect(file.receive(Readable.from([data]))).rejects.toThrow(
      /blob: registry sent more than the 4 bytes the manifest declares/,
    );
    expect(file.done).toBe(0);
    await file.close(false);
    await expect(BlobFile.create(join(dir, 'resumed'), 4, 'blob')).rejects.toThrow(/EEXIST/);
  });
});
