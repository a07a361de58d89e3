import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { readSandboxRecord, type SandboxRecord } from '../record.js';
import type { SandboxRecordStore } from '../seams.js';
import type { SandboxState } from '../states.js';

/**
 * Durable sandbox records in SQLite (WAL, synchronous=FULL: a record the API reported must
 * survive a crash). State changes are compare-and-set on the stored state.
 */
export class SandboxStore implements SandboxRecordStore {
  private readonly db: Database.Database;

  constructor(file: string) {
    mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.exec(`CREATE TABLE IF NOT EXISTS sandboxes (
      id TEXT PRIMARY KEY,
      state TEXT NOT NULL,
      started_at TEXT NOT NULL,
      record TEXT NOT NULL
    )`);
  }

  insert(rec: SandboxRecord): void {
    this.db
      .prepare('INSERT INTO sandboxes (id, state, started_at, record) VALUES (?, ?, ?, ?)')
      .run(rec.sandboxId, rec.state, rec.startedAt, JSON.stringify(rec));
  }

  /** Writes `rec` only if the stored state is still `expected`; false otherwise. */
  compareAndSet(rec: SandboxRecord, expected: SandboxState): boolean {
    const r = this.db
      .prepare('UPDATE sandboxes SET state = ?, record = ? WHERE id = ? AND state = ?')
      .run(rec.state, JSON.stringify(rec), rec.sandboxId, expected);
    return r.changes === 1;
  }

  /** Overwrites fields that do not change the state (end time, metadata). */
  update(rec: SandboxRecord): void {
    this.db
      .prepare('UPDATE sandboxes SET record = ? WHERE id = ? AND state = ?')
      .run(JSON.stringify(rec), rec.sandboxId, rec.state);
  }

  get(id: string): SandboxRecord | undefined {
    const row = this.db.prepare('SELECT record FROM sandboxes WHERE id = ?').get(id) as
      { record: string } | undefined;
    return row ? parse(id, row.record) : undefined;
  }

  delete(id: string): void {
    this.db.prepare('DELETE FROM sandboxes WHERE id = ?').run(id);
  }

  /** Newest first. */
  all(): SandboxRecord[] {
    const rows = this.db.prepare('SELECT id, record FROM sandboxes ORDER BY started_at DESC, id').all() as {
      id: string;
      record: string;
    }[];
    return rows.map((r) => parse(r.id, r.record));
  }

  close(): void {
    this.db.close();
  }
}

function parse(id: string, text: string): SandboxRecord {
  return readSandboxRecord(JSON.parse(text), `stored record of sandbox ${id}`);
}
