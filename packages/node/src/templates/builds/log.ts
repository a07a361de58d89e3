/** One line of a build's log, as E2B's build status returns it. */
export interface BuildLogEntry {
  readonly timestamp: string;
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly message: string;
}

/** A build's log: whole lines, in order; command output is split into lines as it arrives. */
export class BuildLog {
  readonly entries: BuildLogEntry[] = [];
  private partial = '';

  private add(level: BuildLogEntry['level'], message: string): void {
    this.entries.push({ timestamp: new Date().toISOString(), level, message });
  }

  info(message: string): void {
    this.add('info', message);
  }

  error(message: string): void {
    this.flush();
    this.add('error', message);
  }

  output(text: string): void {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop()!;
    for (const l of lines) this.add('info', l);
  }

  flush(): void {
    if (this.partial) this.add('info', this.partial);
    this.partial = '';
  }

  /** The entries from `offset` on, as `{logEntries, logs}`. */
  since(offset: number): { logEntries: BuildLogEntry[]; logs: string[] } {
    const logEntries = this.entries.slice(Math.max(0, offset));
    return { logEntries, logs: logEntries.map((e) => `[${e.timestamp}] ${e.message}`) };
  }
}
