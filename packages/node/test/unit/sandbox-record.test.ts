import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { sandboxRecord } from '@agentenv/test-support/fakes';
import { SandboxStore } from '../../src/orchestrator/persistence/sandbox-store.js';
import {
  readSandboxRecord,
  SANDBOX_RECORD_VERSION,
  SandboxRecordError,
  type SandboxRecord,
} from '../../src/orchestrator/record.js';

const record: SandboxRecord = sandboxRecord({ sandboxId: 'abc123', state: 'paused', pauseId: 'p1' });

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('sandbox records: versions', () => {
  it('reads the current version, and records from before versioning as version 1', () => {
    expect(readSandboxRecord(record, 'r')).toEqual(record);
    const { version: _v, ...unversioned } = record;
    expect(readSandboxRecord(unversioned, 'r').version).toBe(1);
  });

  it('refuses a version newer than this node reads, saying so', () => {
    const newer = { ...record, version: SANDBOX_RECORD_VERSION + 1 };
    expect(() => readSandboxRecord(newer, 'pause p9 of sandbox abc123')).toThrow(SandboxRecordError);
    expect(() => readSandboxRecord(newer, 'pause p9 of sandbox abc123')).toThrow(
      /^pause p9 of sandbox abc123 has record version 2, newer than this node reads \(1\): .*upgrade this node/,
    );
  });

  it('refuses what is not a record', () => {
    expect(() => readSandboxRecord('x', 'r')).toThrow(/not a sandbox record/);
    expect(() => readSandboxRecord({ ...record, version: 0 }, 'r')).toThrow(/bad record version/);
    expect(() => readSandboxRecord({ ...record, state: 'exploded' }, 'r')).toThrow(/unknown state/);
    expect(() => readSandboxRecord({ ...record, memoryMB: '1' }, 'r')).toThrow(/missing memoryMB/);
    const { egress: _e, ...noEgress } = record;
    expect(() => readSandboxRecord(noEgress, 'r')).toThrow(/missing egress/);
  });

  it('the SQLite store writes the version and refuses a newer record it finds', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'aenv-records-'));
    dirs.push(dir);
    const file = join(dir, 'sandboxes.db');
    const store = new SandboxStore(file);
    store.insert(record);
    expect(store.get('abc123')).toEqual(record);
    expect(store.compareAndSet({ ...record, state: 'resuming' }, 'paused')).toBe(true);
    expect(store.compareAndSet({ ...record, state: 'running' }, 'paused')).toBe(false);
    store.close();
    const db = new Database(file);
    db.prepare('UPDATE sandboxes SET record = ? WHERE id = ?').run(
      JSON.stringify({ ...record, version: 7 }),
      'abc123',
    );
    db.close();
    const again = new SandboxStore(file);
    expect(() => again.all()).toThrow(/stored record of sandbox abc123 has record version 7/);
    again.close();
  });
});

describe('sandbox records: the SQLite store', () => {
  it('picks the running records whose end time has come, and no others', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'aenv-records-'));
    dirs.push(dir);
    const store = new SandboxStore(join(dir, 'sandboxes.db'));
    const at = (id: string, state: SandboxRecord['state'], endAt: string) =>
      store.insert(sandboxRecord({ sandboxId: id, state, endAt }));
    at('past', 'running', '2026-01-01T00:00:00.000Z');
    at('now', 'running', '2026-01-01T00:00:05.000Z');
    at('later', 'running', '2026-01-01T00:00:05.001Z');
    at('pausedPast', 'paused', '2026-01-01T00:00:00.000Z');
    const ids = store.expiredBy('2026-01-01T00:00:05.000Z').map((r) => r.sandboxId);
    expect(ids.sort()).toEqual(['now', 'past']);
    store.close();
  });

  it('counts records by their stored state, following each change, without reading them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'aenv-records-'));
    dirs.push(dir);
    const file = join(dir, 'sandboxes.db');
    const store = new SandboxStore(file);
    for (const id of ['a', 'b', 'c']) store.insert(sandboxRecord({ sandboxId: id, state: 'running' }));
    store.insert(sandboxRecord({ sandboxId: 'd', state: 'paused' }));
    expect(store.compareAndSet(sandboxRecord({ sandboxId: 'a', state: 'pausing' }), 'running')).toBe(true);
    store.delete('b');
    expect(store.countByState()).toEqual(
      new Map([
        ['running', 1],
        ['pausing', 1],
        ['paused', 1],
      ]),
    );
    // A record this node cannot read (a newer node's) is still counted: metrics keep working.
    const db = new Database(file);
    db.prepare('UPDATE sandboxes SET record = ? WHERE id = ?').run('{"version":7}', 'd');
    db.close();
    expect(store.countByState().get('paused')).toBe(1);
    store.close();
  });
});
