import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { verifyProof, writeProof } from '../../src/sudo/proof.js';

const NONCE = '0123456789abcdef0123456789abcdef';
const isRoot = process.getuid?.() === 0;

describe('sudo identity proof', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aenv-sudo-proof-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("proves the creator's uid", () => {
    writeProof({ nonce: NONCE, dir });
    expect(fs.statSync(path.join(dir, NONCE)).mode & 0o777).toBe(0o600);
    expect(verifyProof(dir, NONCE)).toBe(process.getuid!());
  });

  it.skipIf(!isRoot)('reports the owner of the file, not the verifier', () => {
    writeProof({ nonce: NONCE, dir });
    fs.chownSync(path.join(dir, NONCE), 1234, 1234);
    expect(verifyProof(dir, NONCE)).toBe(1234);
  });

  it('never writes through an existing file or a symlink', () => {
    fs.writeFileSync(path.join(dir, 'target'), 'x');
    fs.symlinkSync(path.join(dir, 'target'), path.join(dir, NONCE));
    expect(() => writeProof({ nonce: NONCE, dir })).toThrow(/EEXIST/);
    expect(() => writeProof({ nonce: 'x/../y', dir })).toThrow(/invalid challenge/);
    expect(() => writeProof({ nonce: NONCE, dir: 'relative' })).toThrow(/invalid challenge/);
  });

  it('refuses missing files, symlinks, hard links, wrong modes and wrong contents', () => {
    expect(() => verifyProof(dir, NONCE)).toThrow(/ENOENT/);
    const file = path.join(dir, NONCE);
    const other = path.join(dir, 'other');

    fs.writeFileSync(other, NONCE, { mode: 0o600 });
    fs.symlinkSync(other, file);
    expect(() => verifyProof(dir, NONCE)).toThrow(/ELOOP/);
    fs.rmSync(file);

    fs.linkSync(other, file);
    expect(() => verifyProof(dir, NONCE)).toThrow(/invalid proof/);
    fs.rmSync(other);
    expect(verifyProof(dir, NONCE)).toBe(process.getuid!());

    fs.chmodSync(file, 0o620);
    expect(() => verifyProof(dir, NONCE)).toThrow(/invalid proof/);
    fs.chmodSync(file, 0o600);
    fs.writeFileSync(file, NONCE.replace('0', '1'));
    expect(() => verifyProof(dir, NONCE)).toThrow(/invalid proof/);
    fs.rmSync(file);
    fs.mkdirSync(file);
    expect(() => verifyProof(dir, NONCE)).toThrow(/invalid proof/);
  });
});
