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
  /** Prepared once: preparing a statement costs more than running it, and the loops run often. */
  private readonly sql: ReturnType<typeof statements>;

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
    this.sql = statements(this.db);
  }

  insert(rec: SandboxRecord): void {
    this.sql.insert.run(rec.sandboxId, rec.state, rec.startedAt, JSON.stringify(rec));
  }

  /** Writes `rec` only if the stored state is still `expected`; false otherwise. */
  compareAndSet(rec: SandboxRecord, expected: SandboxState): boolean {
    return this.sql.compareAndSet.run(rec.state, JSON.stringify(rec), rec.sandboxId, expected).changes === 1;
  }

  /** Overwrites fields that do not change the state (end time, metadata). */
  update(rec: SandboxRecord): void {
    this.sql.update.run(JSON.stringify(rec), rec.sandboxId, rec.state);
  }

  get(id: string): SandboxRecord | undefined {
    const row = this.sql.get.get(id) as { record: string } | undefined;
    return row ? parse(id, row.record) : undefined;
  }

  delete(id: string): void {
    this.sql.delete.run(id);
  }

  /** Newest first. */
  all(): SandboxRecord[] {
    return this.rows(this.sql.all.all());
  }

  /**
   * Running records whose end time is at or before `now`: SQLite picks them, so a sweep over a
   * node of hundreds of sandboxes parses only the few that expired. End times are written as
   * ISO-8601 UTC (isoTime), which compare as strings.
   */
  expiredBy(now: string): SandboxRecord[] {
    return this.rows(this.sql.expiredBy.all(now));
  }

  countByState(): Map<string, number> {
    const rows = this.sql.countByState.all() as { state: string; n: number }[];
    return new Map(rows.map((r) => [r.state, r.n]));
  }

  close(): void {
    this.db.close();
  }

  private rows(rows: unknown[]): SandboxRecord[] {
    return (rows as { id: string; record: string }[]).map((r) => parse(r.id, r.record));
  }
}

function statements(db: Database.Database) {
  return {
    insert: db.prepare('INSERT INTO sandboxes (id, state, started_at, record) VALUES (?, ?, ?, ?)'),
    compareAndSet: db.prepare('UPDATE sandboxes SET state = ?, record = ? WHERE id = ? AND state = ?'),
    update: db.prepare('UPDATE sandboxes SET record = ? WHERE id = ? AND state = ?'),
    get: db.prepare('SELECT record FROM sandboxes WHERE id = ?'),
    delete: db.prepare('DELETE FROM sandboxes WHERE id = ?'),
    all: db.prepare('SELECT id, record FROM sandboxes ORDER BY started_at DESC, id'),
    countByState: db.prepare('SELECT state, COUNT(*) AS n FROM sandboxes GROUP BY state'),
    expiredBy: db.prepare(
      "SELECT id, record FROM sandboxes WHERE state = 'running' AND json_extract(record, '$.endAt') <= ?",
    ),
  };
}

function parse(id: string, text: string): SandboxRecord {
  return readSandboxRecord(JSON.parse(text), `stored record of sandbox ${id}`);
}
