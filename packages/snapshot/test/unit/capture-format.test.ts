import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCaptureMeta, readCapture, CAPTURE_FORMAT } from '../../src/capture.js';
import { CaptureInvalidError } from '../../src/errors.js';

const meta = {
  format: CAPTURE_FORMAT,
  driver: 'gvisor',
  runtimeVersion: '0.0~20240729.0',
  createdAt: '2026-01-01T00:00:00Z',
  sourceId: 'aenv-0123456789abcdef0123',
  resources: { cpuCount: 1, memoryMB: 512, diskSizeMB: 512 },
  layers: ['/l/rootfs'],
  mounts: [{ hostPath: '/t', sandboxPath: '/opt/aenv-tools' }],
  init: { args: ['/opt/aenv-tools/bin/envd'] },
  envdPort: 49983,
  hostname: 'aenv',
  settings: { upper: 'memory' },
  files: [{ name: 'checkpoint.img', bytes: 5 }],
};

describe('capture metadata', () => {
  it('accepts a complete record', () => {
    expect(parseCaptureMeta(meta)).toEqual(meta);
  });

  it.each([
    ['format', { ...meta, format: 'other' }],
    ['resources', { ...meta, resources: { cpuCount: 1 } }],
    ['layers', { ...meta, layers: [] }],
    ['files', { ...meta, files: [{ name: '../x', bytes: 1 }] }],
    ['init', { ...meta, init: {} }],
  ])('rejects bad %s', (_, bad) => {
    expect(() => parseCaptureMeta(bad)).toThrow(CaptureInvalidError);
  });
});

describe('readCapture', () => {
  let dir = '';
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('checks that listed files exist with their sizes', async () => {
    dir = await mkdtemp(join(tmpdir(), 'cap-'));
    await writeFile(join(dir, 'capture.json'), JSON.stringify(meta));
    await expect(readCapture(dir)).rejects.toThrow(/missing checkpoint.img/);
    await writeFile(join(dir, 'checkpoint.img'), 'abc');
    await expect(readCapture(dir)).rejects.toThrow(/3 bytes, expected 5/);
    await writeFile(join(dir, 'checkpoint.img'), 'abcde');
    expect((await readCapture(dir)).meta.sourceId).toBe(meta.sourceId);
  });

  it('reports a missing or garbled capture', async () => {
    dir = await mkdtemp(join(tmpdir(), 'cap-'));
    await expect(readCapture(join(dir, 'nope'))).rejects.toThrow(/no capture/);
    await writeFile(join(dir, 'capture.json'), '{');
    await expect(readCapture(dir)).rejects.toThrow(/not valid JSON/);
  });
});
