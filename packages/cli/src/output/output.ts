import type { Writable } from 'node:stream';
import { UsageError } from '../errors.js';
import { renderTable, type Column } from './table.js';

export type OutputFormat = 'table' | 'json';

/** `--output` wins; otherwise a table on a terminal and JSON when stdout is piped. */
export function resolveFormat(option: string | undefined, stdoutIsTTY: boolean): OutputFormat {
  if (option === undefined) return stdoutIsTTY ? 'table' : 'json';
  const v = option.toLowerCase();
  if (v === 'table' || v === 'json') return v;
  throw new UsageError(`invalid --output ${JSON.stringify(option)}: use table or json`);
}

/** Writes command results as tables (for people) or JSON (for programs). */
export class Output {
  constructor(
    readonly format: OutputFormat,
    readonly stdout: Writable & { isTTY?: boolean } = process.stdout,
    readonly stderr: Writable & { isTTY?: boolean } = process.stderr,
  ) {}

  get json(): boolean {
    return this.format === 'json';
  }

  /** A list: the JSON array as is, or a table with a fixed set of columns. */
  list<T>(rows: T[], columns: Column<T>[]): void {
    if (this.json) this.stdout.write(JSON.stringify(rows, null, 2) + '\n');
    else this.stdout.write(renderTable(columns, rows));
  }

  /** One result: JSON, or the human sentence(s) in table mode. */
  result(value: unknown, human: string | (() => string)): void {
    if (this.json) this.stdout.write(JSON.stringify(value, null, 2) + '\n');
    else this.stdout.write((typeof human === 'function' ? human() : human).replace(/\n?$/, '\n'));
  }

  /** Progress and notes for people: stderr, so stdout stays parseable. */
  note(line: string): void {
    this.stderr.write(line.replace(/\n?$/, '\n'));
  }
}
