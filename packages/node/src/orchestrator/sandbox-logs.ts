import { isoTime, systemClock, type Clock } from '../util/index.js';

const MAX_LINES = 500;

/** Recent lifecycle lines per sandbox, for GET /sandboxes/{id}/logs. Kept in memory only. */
export class SandboxLogs {
  private readonly lines = new Map<string, { timestamp: string; line: string }[]>();

  constructor(private readonly clock: Clock = systemClock) {}

  add(id: string, line: string): void {
    let l = this.lines.get(id);
    if (!l) this.lines.set(id, (l = []));
    l.push({ timestamp: isoTime(this.clock.now()), line });
    if (l.length > MAX_LINES) l.splice(0, l.length - MAX_LINES);
  }

  get(id: string): { timestamp: string; line: string }[] {
    return [...(this.lines.get(id) ?? [])];
  }

  drop(id: string): void {
    this.lines.delete(id);
  }
}
