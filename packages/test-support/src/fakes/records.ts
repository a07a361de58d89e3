import {
  readSandboxRecord,
  type SandboxRecord,
  type SandboxRecordStore,
  type SandboxState,
} from '@agentenv/node/server';

/**
 * Sandbox records in memory, stored as JSON like the SQLite store (a caller never shares an
 * object with the store) and read back through the same versioned reader.
 */
export class MemoryRecordStore implements SandboxRecordStore {
  private readonly rows = new Map<string, string>();

  insert(rec: SandboxRecord): void {
    if (this.rows.has(rec.sandboxId)) throw new Error(`fake store: ${rec.sandboxId} exists`);
    this.rows.set(rec.sandboxId, JSON.stringify(rec));
  }

  compareAndSet(rec: SandboxRecord, expected: SandboxState): boolean {
    if (this.get(rec.sandboxId)?.state !== expected) return false;
    this.rows.set(rec.sandboxId, JSON.stringify(rec));
    return true;
  }

  update(rec: SandboxRecord): void {
    if (this.get(rec.sandboxId)?.state === rec.state) this.rows.set(rec.sandboxId, JSON.stringify(rec));
  }

  get(id: string): SandboxRecord | undefined {
    const text = this.rows.get(id);
    return text === undefined ? undefined : readSandboxRecord(JSON.parse(text), `record ${id}`);
  }

  delete(id: string): void {
    this.rows.delete(id);
  }

  all(): SandboxRecord[] {
    return [...this.rows.keys()]
      .map((id) => this.get(id)!)
      .sort((a, b) =>
        a.startedAt === b.startedAt
          ? a.sandboxId.localeCompare(b.sandboxId)
          : a.startedAt < b.startedAt
            ? 1
            : -1,
      );
  }

  expiredBy(now: string): SandboxRecord[] {
    return this.all().filter((r) => r.state === 'running' && r.endAt <= now);
  }

  /** By the stored state alone, as the SQLite store's column: a record it cannot read still counts. */
  countByState(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const text of this.rows.values()) {
      const { state } = JSON.parse(text) as { state: string };
      counts.set(state, (counts.get(state) ?? 0) + 1);
    }
    return counts;
  }

  /** Writes a raw stored value, as a crashed or newer node may have left it. */
  putRaw(id: string, value: unknown): void {
    this.rows.set(id, JSON.stringify(value));
  }
}
