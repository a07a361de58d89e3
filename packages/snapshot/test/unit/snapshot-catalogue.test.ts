import { describe, expect, it } from 'vitest';
import { CAPTURE_FORMAT } from '../../src/capture.js';
import { DEFAULT_CHUNKING } from '../../src/chunker.js';
import {
  RepositoryConfigError,
  SNAPSHOT_ERROR_KIND,
  SnapshotCorruptError,
  SnapshotInvalidError,
} from '../../src/errors.js';
import { createRepository } from '../../src/index.js';
import { encodeManifest, MANIFEST_FORMAT, parseManifest, sha256, type Manifest } from '../../src/manifest.js';
import { checkS3Options, S3Repository } from '../../src/s3-repository.js';
import type { SnapshotRecord } from '../../src/repository.js';
import {
  blobKey,
  checkAliasName,
  decodeAliasName,
  encodeAliasName,
  validateRecord,
} from '../../src/repository-keys.js';
import { pageRecords } from '../../src/repository-paging.js';

const H = sha256('x');

function rec(id: string, createdAt: string, labels: Record<string, string> = {}): SnapshotRecord {
  return { format: 'aenv-snapshot/1', id, createdAt, labels, meta: {}, manifest: H, bytesTotal: 1 };
}

describe('snapshot catalogue: names', () => {
  it('encodes any printable name into one safe path segment and back', () => {
    for (const name of [
      'plain',
      'with/slash',
      '.',
      '..',
      '.hidden',
      'spa ce',
      'ünï©ødé',
      '%41',
      'a:b@c+d',
      'x'.repeat(256),
    ]) {
      const enc = encodeAliasName(name);
      expect(enc).toMatch(/^[A-Za-z0-9%_.!~*'()-]+$/);
      expect(enc).not.toMatch(/^\./);
      expect(decodeAliasName(enc)).toBe(name);
    }
    expect(blobKey(H)).toBe(`blobs/sha256/${H.slice(0, 2)}/${H}`);
  });

  it('refuses empty, over-long and control-character names', () => {
    for (const bad of ['', 'x'.repeat(257), 'a\nb', 'nul\u0000']) {
      expect(() => checkAliasName(bad)).toThrow(SnapshotInvalidError);
    }
  });
});

describe('snapshot catalogue: listing', () => {
  const all = [
    rec('a1', '2026-01-01T00:00:01.000Z', { sandboxId: 's1' }),
    rec('b2', '2026-01-01T00:00:03.000Z', { sandboxId: 's2' }),
    rec('c3', '2026-01-01T00:00:02.000Z', { sandboxId: 's1' }),
    rec('d4', '2026-01-01T00:00:03.000Z', { sandboxId: 's1' }),
  ];

  it('orders newest first, ties by id, and pages with tokens', () => {
    const p1 = pageRecords([...all], {}, { limit: 2 });
    expect(p1.records.map((r) => r.id)).toEqual(['d4', 'b2']);
    const p2 = pageRecords([...all], {}, { limit: 2, nextToken: p1.nextToken! });
    expect(p2.records.map((r) => r.id)).toEqual(['c3', 'a1']);
    expect(p2.nextToken).toBeUndefined();
    // A record added after the first page does not shift the second one.
    const later = [...all, rec('e5', '2026-01-01T00:00:09.000Z')];
    expect(pageRecords(later, {}, { limit: 2, nextToken: p1.nextToken! }).records.map((r) => r.id)).toEqual([
      'c3',
      'a1',
    ]);
  });

  it('filters by labels and parent', () => {
    expect(pageRecords([...all], { labels: { sandboxId: 's1' } }, {}).records.map((r) => r.id)).toEqual([
      'd4',
      'c3',
      'a1',
    ]);
    const child = { ...rec('f6', '2026-01-02T00:00:00.000Z'), parent: 'a1' };
    expect(pageRecords([...all, child], { parent: 'a1' }, {}).records.map((r) => r.id)).toEqual(['f6']);
  });

  it('refuses bad limits and tokens', () => {
    expect(() => pageRecords([], {}, { limit: 0 })).toThrow(SnapshotInvalidError);
    expect(() => pageRecords([], {}, { limit: 1001 })).toThrow(SnapshotInvalidError);
    expect(() => pageRecords([], {}, { nextToken: 'garbage' })).toThrow(/nextToken/);
  });

  it('validates records', () => {
    expect(validateRecord(rec('ok1', '2026-01-01T00:00:00Z'), 'r')).toBeTruthy();
    expect(() => validateRecord({ ...rec('ok1', 'x'), createdAt: 'yesterday' }, 'r')).toThrow(/createdAt/);
    expect(() => validateRecord({ ...rec('../x', '2026-01-01T00:00:00Z') }, 'r')).toThrow(/bad id/);
    expect(() =>
      validateRecord({ ...rec('ok1', '2026-01-01T00:00:00Z'), labels: { 'a b': 'x' } }, 'r'),
    ).toThrow(/label/);
    expect(() => validateRecord({ ...rec('ok1', '2026-01-01T00:00:00Z'), manifest: 'abc' }, 'r')).toThrow(
      /manifest/,
    );
  });
});

describe('snapshot catalogue: manifests', () => {
  const capture = {
    format: CAPTURE_FORMAT,
    driver: 'gvisor',
    runtimeVersion: 'v',
    createdAt: '2026-01-01T00:00:00Z',
    sourceId: 's',
    resources: { cpuCount: 1, memoryMB: 256, diskSizeMB: 512 },
    layers: ['/l'],
    mounts: [],
    init: { args: ['/bin/envd'] },
    envdPort: 49983,
    hostname: 'h',
    settings: {},
    files: [{ name: 'pages.img', bytes: 10 }],
  };
  const good: Manifest = {
    format: MANIFEST_FORMAT,
    capture,
    chunking: DEFAULT_CHUNKING,
    files: [
      {
        name: 'pages.img',
        bytes: 10,
        mode: 'gear',
        chunks: [
          [H, 4],
          [H, 6],
        ],
      },
    ],
  };

  it('round-trips and rejects inconsistent manifests as corruption', () => {
    expect(parseManifest(encodeManifest(good), 'm')).toEqual(good);
    const bad = (m: unknown) => () => parseManifest(Buffer.from(JSON.stringify(m)), 'm');
    expect(bad({ ...good, format: 'x' })).toThrow(SnapshotCorruptError);
    expect(bad({ ...good, files: [{ ...good.files[0], bytes: 11 }] })).toThrow(/add up/);
    expect(bad({ ...good, files: [{ ...good.files[0], name: '../x' }] })).toThrow(/file name/);
    expect(bad({ ...good, files: [] })).toThrow(/pages\.img not stored/);
    expect(bad({ ...good, files: [{ ...good.files[0], chunks: [['zz', 10]] }] })).toThrow(/bad chunk/);
    expect(() => parseManifest(Buffer.from('{'), 'm')).toThrow(/not JSON/);
  });
});

describe('snapshot catalogue: oss options', () => {
  const base = { endpoint: 'http://127.0.0.1:9', bucket: 'b1-ok', region: 'us-east-1' };

  it('requires a region, with a message naming the setting', () => {
    for (const region of [undefined, '', '  ']) {
      expect(() => new S3Repository({ ...base, region } as never)).toThrow(RepositoryConfigError);
    }
    expect(() => createRepository({ backend: 'oss', ...base, region: undefined } as never)).toThrow(
      /^snapshot\.oss\.region is required/,
    );
  });

  it('checks the other settings', () => {
    expect(checkS3Options(base)).toBe(base);
    expect(() => checkS3Options({ ...base, bucket: 'Bad_Bucket' })).toThrow(/bucket/);
    expect(() => checkS3Options({ ...base, endpoint: 'ftp://x' })).toThrow(/endpoint/);
    expect(() => checkS3Options({ ...base, addressingStyle: 'dns' as never })).toThrow(/addressing_style/);
    expect(() => checkS3Options({ ...base, accessKeyId: 'a' })).toThrow(/go together/);
    expect(() =>
      checkS3Options({ ...base, accessKeyId: 'a', secretAccessKey: 'b', credentialProcess: 'x' }),
    ).toThrow(/not both/);
    expect(() => createRepository({ backend: 'nfs' } as never)).toThrow(/posix_fs/);
    expect(new S3Repository({ ...base, prefix: 'a/b' }).location).toBe('s3://b1-ok/a/b/');
  });

  it('maps every error code to an API error kind', () => {
    expect(SNAPSHOT_ERROR_KIND.alias_taken).toBe('conflict');
    expect(SNAPSHOT_ERROR_KIND.unavailable).toBe('unavailable');
    expect(SNAPSHOT_ERROR_KIND.not_found).toBe('not_found');
  });
});
