const MAX_ENTRIES = 500;

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/** One structured line of a sandbox's log (E2B's SandboxLogEntry, time in milliseconds). */
export interface SandboxLogEntry {
  timestampMs: number;
  level: LogLevel;
  message: string;
  fields: Record<string, string>;
}

/** Recent lifecycle lines per sandbox, for the logs endpoints. Kept in memory only. */
export class SandboxLogs {
  private readonly entries = new Map<string, SandboxLogEntry[]>();

  constructor(private readonly now: () => number = Date.now) {}

  add(id: string, message: string, level: LogLevel = 'info', fields: Record<string, string> = {}): void {
    let l = this.entries.get(id);
    if (!l) this.entries.set(id, (l = []));
    // Entries stay in time order even if the clock steps back, so cursors keep working.
    const last = l[l.length - 1]?.timestampMs ?? 0;
    l.push({ timestampMs: Math.max(this.now(), last), level, message, fields });
    if (l.length > MAX_ENTRIES) l.splice(0, l.length - MAX_ENTRIES);
  }

  get(id: string): SandboxLogEntry[] {
    return [...(this.entries.get(id) ?? [])];
  }

  drop(id: string): void {
    this.entries.delete(id);
  }
}

export interface LogQuery {
  /** Entries at or after this time (unix ms); all when absent. */
  cursorMs?: number;
  limit: number;
  /** forward: oldest first; backward: newest first. */
  direction: 'forward' | 'backward';
  /** The lowest level to return. */
  level?: LogLevel;
  /** Case-sensitive substring of the message. */
  search?: string;
}

/** E2B's log query (the v2 endpoint's cursor, limit, direction, level and search). Pure. */
export function queryLogs(entries: readonly SandboxLogEntry[], q: LogQuery): SandboxLogEntry[] {
  const min = q.level ? LOG_LEVELS.indexOf(q.level) : 0;
  const hits = entries.filter(
    (e) =>
      (q.cursorMs === undefined || e.timestampMs >= q.cursorMs) &&
      LOG_LEVELS.indexOf(e.level) >= min &&
      (q.search === undefined || e.message.includes(q.search)),
  );
  return (q.direction === 'backward' ? hits.reverse() : hits).slice(0, q.limit);
}

/**
 * The raw line of an entry in the deprecated endpoint's `logs[].line`: a flat JSON object with
 * `level`, `message` and the fields, as E2B's log pipeline stores them (the e2b CLI parses it).
 */
export function logLine(e: SandboxLogEntry): string {
  return JSON.stringify({ ...e.fields, level: e.level, message: e.message });
}
